/*
 * Spawning a child: the one way both sepcsi-rpcd and sepcsi-mounthelper are
 * started (fork, fixed descriptors, privilege drop in a fixed order, exec).
 */
#ifndef SEPCSI_SUP_SPAWN_H
#define SEPCSI_SUP_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

struct sup_spawn {
	const char *role;    /* "rpcd" or "mounthelper", for log lines */
	const char *path;    /* absolute path of the program */
	char *const *argv;   /* NULL-terminated */
	int peer_fd;         /* becomes fd 3 (SEPCSI_FD_PEER) */
	int ctl_fd;          /* becomes fd 4 (SEPCSI_FD_CONTROL) */
	bool drop_privilege; /* run as uid:gid with no capabilities at all */
	bool quiet;          /* stdout and stderr to /dev/null, not the supervisor's log */
	uid_t uid;
	gid_t gid;
};

/*
 * Fork and exec one child. Returns its pid, or -1 with errno if fork failed.
 * Failures after fork are the child's: it logs the failed step and _exit(127)s,
 * which the caller sees as a death before READY. The caller keeps ownership
 * of peer_fd and ctl_fd and closes its copies.
 */
pid_t sup_spawn(const struct sup_spawn *sp);

/*
 * Build the children's environment once, before any spawn: a fixed PATH and a
 * short allowlist passed through from ours (see sup_spawn.c).
 */
void sup_spawn_init_env(void);

#endif
