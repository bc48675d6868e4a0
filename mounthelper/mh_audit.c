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
 * signal, trace or read it), is not dumpable, dies with the helper
 * (PR_SET_PDEATHSIG) and ends with its socket. Its filter (pol_sc_audit)
 * allows reading its socket, writing its file and exiting: nothing else. The
 * worst a compromised helper does through it is add lines, each marked by
 * `sepcsictl audit` as the helper's.
 */
#include "mh_audit.h"

#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "pol_seccomp.h"

static int writer = -1; /* the helper's end of the writer's socket; -1 without a writer */

/* Room for any record log_record writes, and more: a longer message is cut. */
static char msg[1 << 16];

static void __attribute__((noreturn)) serve(void)
{
	for (;;) {
		ssize_t n = read(POL_SC_AUDIT_IN, msg, sizeof(msg) - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0); /* every holder of the helper's end is gone */
		if (msg[n - 1] != '\n')
			msg[n++] = '\n';
		/* A short write to a regular file is a full disk: the rest is lost, not retried. */
		if (write(POL_SC_AUDIT_OUT, msg, (size_t)n) < 0 && errno != EINTR)
			continue;
	}
}

int mh_audit_writer_start(int file_fd, bool log_only)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		log_fatal("cannot make the audit writer's socket: %s", strerror(errno));
	pid_t helper = getpid();
	pid_t pid = fork();
	if (pid < 0)
		log_fatal("cannot start the audit writer: %s", strerror(errno));
	if (pid == 0) {
		/* No capability in any set; its two descriptors, and none else. */
		capng_clear(CAPNG_SELECT_BOTH);
		int in = fcntl(sv[1], F_DUPFD, POL_SC_AUDIT_OUT + 1);
		int out = fcntl(file_fd, F_DUPFD, POL_SC_AUDIT_OUT + 1);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != helper ||
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
	char pidbuf[16];
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
	log_kv(LOG_LVL_DEBUG, "audit_writer_started", "pid", pidbuf, NULL);
	return sv[0];
}

int mh_audit_writer_fd(void)
{
	return writer;
}
