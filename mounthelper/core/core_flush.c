/*
 * The flusher: the slow half of an unmount or a freeze, out of the core's
 * one thread. Unmounting or freezing a file system first writes back what it
 * holds dirty, which can take seconds (tests/bench/core_serial.py); done by
 * the core itself, every other volume's request would wait behind it. So the
 * orchestrating side asks FLUSH of a volume before its UNSTAGE or FREEZE: the
 * core hands the volume's file system to the flusher, a child it forks at
 * start, and goes on serving requests in order; when the flusher says it is
 * done, FLUSH is answered, and the UNSTAGE or FREEZE that follows finds little
 * left to write (what a tenant wrote since, bounded by the kernel's dirty
 * limits, it writes back itself). One flusher, in order: a volume with much
 * to write back delays the others' FLUSH, never another request.
 *
 * The flusher runs as root WITHOUT any capability (dropped right after the
 * fork), under a filter of its own (pol_sc_flusher, compiled into the core's
 * policy by its starter: receive a descriptor,
 * syncfs, close, answer, exit), with no descriptor but its socket. It is
 * killed with the core (PR_SET_PDEATHSIG) and ends when its socket does.
 *
 * Safety argument. syncfs writes back what a file system already holds; it
 * changes nothing a user would see. The core hands over only a detached clone
 * of the file system mounted from the loop device it attached to that
 * volume's own image (mh_vol_lookup, mh_mount_fs_fd: never a path, never a
 * file system a tenant runs), so nothing the flusher waits on is anyone
 * else's; never a frozen one (syncfs would wait for the thaw), and no FREEZE
 * of a volume while its FLUSH is held (core_freeze.c answers BUSY: a write-back
 * in flight holds the file system, so the thaw at the freeze's deadline would
 * wait for it, the core's one thread with it). No other request waits for a
 * FLUSH: a peer that sends one before its FLUSH is answered has it run at
 * once, with every check of its row, and at worst finds the device still held
 * by the clone in flight (BUSY).
 */
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cap-ng.h>

#include "log.h"
#include "mh_at.h"
#include "mh_common.h"
#include "mh_mount.h"
#include "pol_seccomp.h"

static int flusher = -1; /* the core's end of the socket; -1 without a flusher */

static void __attribute__((noreturn)) serve(void)
{
	for (;;) {
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(sizeof(int))];
		} ctl;
		uint32_t tag;
		struct iovec iov = {.iov_base = &tag, .iov_len = sizeof(tag)};
		struct msghdr m = {.msg_iov = &iov,
		                   .msg_iovlen = 1,
		                   .msg_control = ctl.buf,
		                   .msg_controllen = sizeof(ctl.buf)};
		ssize_t n = recvmsg(CORE_FD_FLUSH, &m, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		if (n != sizeof(tag) || !c || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len != CMSG_LEN(sizeof(int)))
			_exit(3); /* only the core writes here */
		int fd;
		memcpy(&fd, CMSG_DATA(c), sizeof(fd));
		int32_t err = syncfs(fd) < 0 ? errno : 0;
		close(fd); /* before the answer: the request finds the file system as it left it */
		uint8_t out[8];
		memcpy(out, &tag, 4);
		memcpy(out + 4, &err, 4);
		if (send(CORE_FD_FLUSH, out, sizeof(out), MSG_NOSIGNAL) != sizeof(out))
			_exit(0);
	}
}

int core_flush_start(const void *filter, size_t len)
{
	int sv[2];
	/* A dead flusher is reaped by the kernel: the core's filter has no wait4. */
	if (signal(SIGCHLD, SIG_IGN) == SIG_ERR ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	pid_t core = getpid(), pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		/* Every set but the bounding one (that needs CAP_SETPCAP): it never execs. */
		capng_clear(CAPNG_SELECT_CAPS);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != core ||
		    capng_apply(CAPNG_SELECT_CAPS) < 0 || dup2(sv[1], CORE_FD_FLUSH) < 0 ||
		    close_range(0, CORE_FD_FLUSH - 1, 0) < 0 ||
		    close_range(CORE_FD_FLUSH + 1, ~0U, 0) < 0 ||
		    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || pol_seccomp_load(filter, len) < 0)
			_exit(1);
		serve();
	}
	close(sv[1]);
	flusher = sv[0]; /* where it is: only the child's end has a number of its own */
	log_kv(LOG_LVL_DEBUG, "flusher_started", NULL);
	return 0;
}

int core_flush_fd(void)
{
	return flusher;
}

static void lost(int err)
{
	if (flusher < 0)
		return;
	log_kv(LOG_LVL_ERROR, "flusher_lost", "error", strerror(err), "then",
	       "FLUSH answered at once: unmounts and freezes write back in the core's own thread",
	       NULL);
	close(flusher);
	flusher = -1;
}

/* The FLUSHes handed over, by the flusher's tag: their request ids. */
#define FLUSH_MAX 16
static struct {
	bool used;
	uint32_t id;
	char volume_id[MH_ID_MAX + 1];
} held[FLUSH_MAX];
static bool taken;

/* The file system mounted from volume_id's own loop device, opened; -1 if none or frozen. */
static int target_of(const struct mh_ctx *c, const char *volume_id)
{
	struct mh_vol v = {0};
	struct mh_res r = {0};
	if (core_frozen(volume_id) || mh_vol_lookup(c, volume_id, &v, &r) < 0 || !v.attached)
		return -1;
	return mh_mount_fs_fd(&v.loop, &r);
}

bool core_flush_begin(const struct mh_ctx *c, const char *volume_id, uint32_t id)
{
	uint32_t tag = 0;
	while (tag < FLUSH_MAX && held[tag].used)
		tag++;
	int fd = flusher < 0 || tag == FLUSH_MAX ? -1 : target_of(c, volume_id);
	if (fd < 0)
		return false;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl = {0};
	struct iovec iov = {.iov_base = &tag, .iov_len = sizeof(tag)};
	struct msghdr m = {.msg_iov = &iov,
	                   .msg_iovlen = 1,
	                   .msg_control = ctl.buf,
	                   .msg_controllen = sizeof(ctl.buf)};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(fd));
	bool sent = sendmsg(flusher, &m, MSG_NOSIGNAL | MSG_DONTWAIT) == sizeof(tag);
	int err = errno;
	close(fd);
	if (!sent && err != EAGAIN) /* EAGAIN: as many as it can hold already */
		lost(err);
	if (sent) {
		held[tag].used = true;
		held[tag].id = id;
		snprintf(held[tag].volume_id, sizeof(held[tag].volume_id), "%s", volume_id);
	}
	taken = sent;
	return sent;
}

bool core_flush_holds(const char *volume_id)
{
	for (size_t i = 0; i < FLUSH_MAX; i++)
		if (held[i].used && strcmp(held[i].volume_id, volume_id) == 0)
			return true;
	return false;
}

bool core_flush_taken(void)
{
	bool t = taken;
	taken = false;
	return t;
}

int core_flush_done(uint32_t *id)
{
	uint8_t in[8];
	uint32_t tag = 0;
	ssize_t n = flusher < 0 ? -1 : recv(flusher, in, sizeof(in), MSG_DONTWAIT);
	if (n == sizeof(in)) {
		int32_t err;
		memcpy(&tag, in, 4);
		memcpy(&err, in + 4, 4);
		if (tag >= FLUSH_MAX || !held[tag].used)
			log_fatal(
			    "the flusher answered for nothing it was given"); /* our own bug */
		if (err)
			log_kv(LOG_LVL_WARN, "flush_failed", "error", strerror(err), NULL);
	} else if (flusher >= 0 && n < 0 && (errno == EAGAIN || errno == EINTR)) {
		return 0;
	} else {
		lost(n < 0 ? errno : EPIPE); /* every FLUSH held is answered, written back or not */
		while (tag < FLUSH_MAX && !held[tag].used)
			tag++;
		if (tag == FLUSH_MAX)
			return 0;
	}
	held[tag].used = false;
	*id = held[tag].id;
	return 1;
}
