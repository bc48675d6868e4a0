/*
 * The metrics file (--metrics-file): Prometheus' text exposition format,
 * replaced atomically, for node-exporter's textfile collector and for
 * `sepcsictl metrics`. The supervisor writes it: its own figures (children up,
 * given up on, restarts and how they ended) followed by what rpcd last
 * reported (CSI calls, latencies, the store's counts, the helper's errors),
 * which rpcd sends as a sealed memfd on its control channel (SUP_CTL_METRICS).
 * rpcd never gets a network socket or a path outside its own directories.
 * Used by sup_child.c only.
 */
#ifndef SEPCSI_SUP_METRICS_H
#define SEPCSI_SUP_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

/* How a child ended, for sepcsi_child_restarts_total{reason}. */
enum sup_end { SUP_END_EXIT = 0, SUP_END_SIGNAL, SUP_END_SECCOMP, SUP_END_KILLED, SUP_END_N };

/* A report of rpcd's being checked by sepcsi-metrics-check (pid 0: none). */
struct sup_metrics_check {
	pid_t pid;
	int report;         /* the sealed memfd */
	int why;            /* the read end of the pipe it writes a refusal's reason to */
	int64_t deadline;   /* mono_ms() past which it is killed */
	bool killed, stale; /* killed at its deadline; rpcd died meanwhile */
};

struct sup_metrics {
	uint64_t restarts[2][SUP_END_N]; /* [enum sup_role][enum sup_end] */
	struct sup_metrics_check check;
	int queued;                /* the newest report that came during a check, + 1; 0: none */
	char check_path[PATH_MAX]; /* sepcsi-metrics-check, with --metrics-file */
	char *rpcd_text;           /* rpcd's last report, checked; NULL if none */
	int64_t rpcd_at_ms;        /* when it came */
	int64_t read_ms;           /* when a report was last read, kept or not (sup_child.c) */
	int64_t start_unix_s;
};

struct sup;

/* A child died without being asked to: count it by how it ended. */
void sup_metrics_death(struct sup *s, int role, int wstatus, bool killed);

/*
 * rpcd sent its report: takes fd. It is used only if it is a memfd sealed
 * against writing, growing and shrinking, at most SUP_METRICS_RPCD_MAX bytes,
 * and sepcsi-metrics-check, started here for it, finds it well-formed
 * Prometheus text, strictly (sup_metrics_text.c says what passes): sepcsi_
 * families and samples only, never one of the supervisor's own names.
 * Otherwise it is logged and dropped, and the last accepted report stays.
 * One is checked at a time: the newest report that comes meanwhile waits for
 * its end (an older waiting one is dropped unread), so the last report rpcd
 * sent is always the one checked.
 */
void sup_metrics_from_rpcd(struct sup *s, int fd);

/* The check of pid ended with wstatus (reaped): 1 if pid was the check, else 0. */
int sup_metrics_check_ended(struct sup *s, pid_t pid, int wstatus);

/* A check past its deadline (check.deadline, while check.pid and not killed) is killed. */
void sup_metrics_check_timer(struct sup *s);

/*
 * A report the check accepted (fd, a sealed memfd): kept if it passes the
 * supervisor's own look, which parses nothing (printable lines, none of the
 * supervisor's names anywhere), and written. Takes fd. For the unit tests too.
 */
void sup_metrics_accept(struct sup *s, int fd);

/* rpcd is gone: its figures go with it. */
void sup_metrics_rpcd_gone(struct sup *s);

/* Write the file now (no-op without --metrics-file). Failures are logged. */
void sup_metrics_write(struct sup *s);

#endif
