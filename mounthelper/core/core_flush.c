/*
 * The core's side of the flusher: the slow half of an unmount or a freeze,
 * out of the core's one thread. Unmounting or freezing a file system first
 * writes back what it holds dirty, which can take seconds
 * (tests/bench/core_serial.py); done by the core itself, every other volume's
 * request would wait behind it. So the orchestrating side asks FLUSH of a
 * volume before its UNSTAGE or FREEZE: the core hands the volume's file
 * system to the flusher and goes on serving requests in order; when the
 * flusher says it is done, FLUSH is answered, and the UNSTAGE or FREEZE that
 * follows finds little left to write (what a tenant wrote since, bounded by
 * the kernel's dirty limits, it writes back itself). One flusher, in order: a
 * volume with much to write back delays the others' FLUSH, never another
 * request.
 *
 * The flusher is `sepcsi-reader --flusher` (reader/reader_flush.c), which the
 * core's starter starts beside it, its socket on the core's CORE_FD_FLUSH:
 * root WITHOUT any capability, under a filter of its own (receive a
 * descriptor, syncfs, close, answer, exit), with no descriptor but its
 * socket, killed with the core. The core forks nothing.
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mh_at.h"
#include "mh_common.h"
#include "mh_mount.h"

static int flusher = -1; /* the core's end of the socket; -1 without a flusher */

int core_flush_init(void)
{
	struct stat st;
	/* A dead flusher (or reader) is reaped by the kernel: the core's filter has no wait4. */
	if (signal(SIGCHLD, SIG_IGN) == SIG_ERR)
		return -1;
	if (fstat(CORE_FD_FLUSH, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		errno = ENOTSOCK;
		return -1;
	}
	flusher = CORE_FD_FLUSH;
	log_kv(LOG_LVL_DEBUG, "flusher_found", NULL);
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
	return sent;
}

bool core_flush_holds(const char *volume_id)
{
	for (size_t i = 0; i < FLUSH_MAX; i++)
		if (held[i].used && strcmp(held[i].volume_id, volume_id) == 0)
			return true;
	return false;
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
