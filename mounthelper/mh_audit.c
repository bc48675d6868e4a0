/*
 * The helper's audit writer, beside its capable core: the one process that
 * holds helper-audit.log open for writing.
 *
 * The helper leaves root once its core runs (mh_identity.c), but its audit
 * file must stay root's: a compromised helper must not rewrite or cut what it
 * recorded before it was compromised. A descriptor of the file, however it was
 * opened, would let it (fcntl clears O_APPEND, then pwrite; ftruncate;
 * fallocate; a shared writable mapping). So the helper forks this writer
 * while it is still root, and keeps only its end of a socket: each record is
 * one message, which the writer appends whole, ending it with a newline if it
 * did not (so a record cut short, or forged, still ends its own line).
 *
 * The writer keeps uid 0 and no capability (so the helper's uid cannot
 * signal, trace or read it), writes as the helper's uid and gid (fsuid,
 * fsgid: root's reserved blocks are not its), is not dumpable, and ends
 * at the end of its socket, once it has written every record sent before:
 * a helper that exits shuts the socket for writing and waits for the writer
 * to end (DRAIN_MS at most), so that it loses none of its records to the
 * supervisor, which kills what a dead helper leaves. Its filter (pol_sc_audit) allows reading its
 * socket, writing its file and exiting: nothing else. The worst a compromised helper does through
 * it is add lines, each marked by `sepcsictl audit` as the helper's, or end it with an empty
 * message, which ends the helper too.
 */
#include "mh_audit.h"

#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "pol_seccomp.h"

static int writer = -1;  /* the helper's end of the writer's socket; -1 without a writer */
static int writer_pidfd; /* the writer, for the helper to wait on at its end */
static pid_t helper;     /* the helper itself (its workers inherit the exit handler) */

/* How long a helper that ends waits for its writer to write what was sent before. */
#define DRAIN_MS 5000

/* Room for any record log_record writes, and more: a longer message is cut. */
static char msg[1 << 16];

static void __attribute__((noreturn)) serve(void)
{
	for (;;) {
		ssize_t n = read(POL_SC_AUDIT_IN, msg, sizeof(msg) - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0); /* the helper's end shut or closed (or an empty message) */
		if (msg[n - 1] != '\n')
			msg[n++] = '\n';
		/* A short write to a regular file is a full disk: the rest is lost, not retried. */
		(void)!write(POL_SC_AUDIT_OUT, msg, (size_t)n);
	}
}

/*
 * At the helper's exit: no more records (for the workers too, which share the
 * socket); the writer writes what was sent before, then reads its end of file
 * and ends; the helper waits for that, a while at most, before the supervisor
 * ends whatever the helper leaves behind.
 */
static void drain(void)
{
	if (writer < 0 || getpid() != helper)
		return;
	struct pollfd p = {.fd = writer_pidfd, .events = POLLIN};
	struct timespec t = {.tv_sec = DRAIN_MS / 1000, .tv_nsec = (DRAIN_MS % 1000) * 1000000L};
	if (shutdown(writer, SHUT_WR) == 0)
		while (ppoll(&p, 1, &t, NULL) < 0 && errno == EINTR)
			;
}

int mh_audit_writer_start(int file_fd, uid_t uid, gid_t gid, bool log_only)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		log_fatal("cannot make the audit writer's socket: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		log_fatal("cannot start the audit writer: %s", strerror(errno));
	if (pid == 0) {
		/*
		 * The helper's uid and gid for the file system: its writes count as
		 * the helper's would, never in the blocks a file system keeps for
		 * root. No capability in any set; its two descriptors, and none else.
		 */
		capng_clear(CAPNG_SELECT_BOTH);
		int in = fcntl(sv[1], F_DUPFD, POL_SC_AUDIT_OUT + 1);
		int out = fcntl(file_fd, F_DUPFD, POL_SC_AUDIT_OUT + 1);
		setfsgid(gid);
		setfsuid(uid);
		if ((uid_t)setfsuid((uid_t)-1) != uid || (gid_t)setfsgid((gid_t)-1) != gid ||
		    prctl(PR_SET_NAME, "sepcsi-audit", 0, 0, 0) < 0 ||
		    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || capng_apply(CAPNG_SELECT_BOTH) < 0 ||
		    in < 0 || out < 0 || dup2(in, POL_SC_AUDIT_IN) < 0 ||
		    dup2(out, POL_SC_AUDIT_OUT) < 0 || close_range(0, POL_SC_AUDIT_IN - 1, 0) < 0 ||
		    close_range(POL_SC_AUDIT_OUT + 1, ~0U, 0) < 0 ||
		    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    pol_seccomp_install(&pol_sc_audit, log_only) < 0)
			_exit(1);
		serve();
	}
	close(sv[1]);
	close(file_fd);
	writer = sv[0];
	helper = getpid();
	writer_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (writer_pidfd < 0 || atexit(drain) != 0)
		log_fatal("cannot follow the audit writer: %s", strerror(errno));
	char pidbuf[16];
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
	log_kv(LOG_LVL_DEBUG, "audit_writer_started", "pid", pidbuf, NULL);
	return sv[0];
}

int mh_audit_writer_fd(void)
{
	return writer;
}
