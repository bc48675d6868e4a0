/*
 * The supervisor's two children and what it does for them: spawn with the
 * channel plumbed, read their control messages, reap them, run restart
 * timers, stop them in order. Decisions come from sup_state.c; this module
 * carries them out. Used by the loop in sup_main.c only.
 */
#ifndef SEPCSI_SUP_CHILD_H
#define SEPCSI_SUP_CHILD_H

#include "sup_config.h"
#include "sup_metrics.h"
#include "sup_state.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The supervisor's exit statuses, documented in sepcsi-supervisor(8). */
#define SUP_EXIT_OK     0 /* stopped on request, no child FAILED */
#define SUP_EXIT_FATAL  1 /* start-up or internal failure */
#define SUP_EXIT_USAGE  2 /* bad flag value, or not root */
#define SUP_EXIT_FAILED 3 /* stopped because a child entered FAILED */

enum sup_role { SUP_HELPER = 0, SUP_RPCD = 1, SUP_NROLES = 2 };

/* A child that ignores SIGTERM this long is killed. */
#define SUP_STOP_TIMEOUT_MS 30000

struct sup_child {
	const char *name; /* "mounthelper" or "rpcd" */
	char path[PATH_MAX];
	char *argv[24];
	struct sup_sm sm;
	struct sup_policy pol;
	pid_t pid;            /* -1 when no process */
	int ctl;              /* our end of its fd 4; -1 when none */
	int pending_peer;     /* channel end kept for its next spawn; -1 when none */
	bool term_sent;       /* SIGTERM sent during the stop */
	char killed_for[96];  /* why we SIGKILLed its current process; "" if we did not */
	char last_death[192]; /* how its last process ended, for the give_up line */
	int64_t kill_at_ms;
	int64_t spawned_at_ms;
};

struct sup {
	const struct sup_config *cfg;
	struct sup_child child[SUP_NROLES];
	bool stopping;
	const char *stop_reason; /* the first reason given to sup_begin_stop() */
	char max_volumes[24];
	char metrics_interval[16];
	char helper_user[24];       /* the helper's --user UID:GID */
	struct sup_metrics metrics; /* sup_metrics.c */
};

/* Fill s from cfg (argv, restart policy); the paths are filled in by the caller. */
void sup_child_init(struct sup *s, const struct sup_config *cfg);

/* Spawn both children, the helper first. */
void sup_start(struct sup *s);

/* The control socket of child r is readable. */
void sup_control(struct sup *s, enum sup_role r);

/* SIGCHLD: reap every dead child, ours or inherited. */
void sup_reap(struct sup *s);

/*
 * Feed SUP_EV_TIMER to each child whose deadline passed (a restart due, or no
 * READY in time); SIGKILL those past the stop timeout.
 */
void sup_timers(struct sup *s);

/* Milliseconds until the next timer is due, or -1 for none: poll's timeout. */
int sup_next_timeout(const struct sup *s);

/* Note a stop request (a signal, or a child given up on); idempotent. */
void sup_begin_stop(struct sup *s, const char *why);

/* Advance the stop: rpcd first, then the helper. True once both are down. */
bool sup_stop_step(struct sup *s);

#endif
