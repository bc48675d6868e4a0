/*
 * Concurrency of the helper: one forked worker per state-changing request.
 *
 * Why processes, not threads: a worker inherits the helper's confinement as
 * it is (capabilities, no_new_privs, the seccomp filter; fork does not widen
 * any of them), shares no memory with the main loop or other workers, and a
 * crash or a kill takes down one operation, not the helper. Every worker sets
 * PR_SET_PDEATHSIG(SIGKILL) first, so a killed helper leaves no worker behind
 * holding a loop device, a mount fd or a frozen file system's fd; the tools a
 * worker runs do the same (mh_mkfs.c).
 *
 * How it works: the main loop reads a request; if it only reads (PING,
 * CAPACITY, STATS) it answers at once; otherwise mh_worker_start() checks the
 * request's ids and paths (mh_ops_keys) against those of the requests in
 * flight: any overlap, or MH_WORKERS_MAX in flight, is answered MH_E_BUSY at
 * once (the helper trusts nothing rpcd says, including its own locks). Else a
 * worker is forked; it handles the request (audit record included), sends the
 * answer itself on the request channel (a SOCK_SEQPACKET datagram is sent
 * whole, so answers from several workers never interleave) and exits 0, or 1
 * if the channel is gone. Right BEFORE sending, the worker writes NOTE_DONE to
 * a pipe the main loop holds: the request's ids are released then, so a
 * request rpcd sends after reading the answer can never find them still
 * taken (the main loop drains every worker pipe before it reads a request).
 * End of file on that pipe means the worker has exited: the main loop reaps
 * it, and answers for one that died without its byte (MH_E_FAILED), so rpcd
 * never waits forever; if that worker may have frozen a file system for a
 * copy, the main loop thaws it (mh_copy_thaw). A worker also notes on the
 * pipe when it freezes and thaws a source file system: one that keeps it
 * frozen longer than the policy's freeze_max_seconds is killed and the file
 * system thawed by the main loop (mh_workers_enforce), so no freeze outlives
 * its bound whatever the copy does.
 *
 * Runs in the helper's main process (start, reap) and in the worker (the
 * operation). Fatal: nothing; a fork that fails is an error answer.
 */
#include "mh_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mh_copy.h"
#include "mh_ops.h"
#include "mh_space.h"

struct slot {
	pid_t pid;         /* 0: free */
	int pidfd;         /* the worker's pidfd: the only way the helper signals it */
	int fd;            /* read end of the worker's pipe (O_NONBLOCK) */
	bool answered;     /* its NOTE_DONE arrived: the ids are free again */
	int64_t frozen_ms; /* when it froze a source file system (NOTE_FROZEN), 0 if not frozen */
	bool overdue;      /* killed for holding a freeze too long */
	struct mh_space_hold hold; /* its claim on the data directory (mh_space.c) */
	struct mh_msg req;         /* what it is doing (its keys point in here) */
};

static struct slot slots[MH_WORKERS_MAX];
static int note_fd = -1; /* in a worker: its end of the pipe */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void mh_worker_note(char what)
{
	if (note_fd >= 0)
		(void)!write(note_fd, &what, 1);
}

size_t mh_workers_count(void)
{
	size_t n = 0;
	for (size_t i = 0; i < MH_WORKERS_MAX; i++)
		n += slots[i].pid != 0;
	return n;
}

static void send_answer(int peer, const struct mh_msg *ans)
{
	uint8_t out[MH_MSG_MAX];
	size_t len;
	if (peer < 0)
		return;
	if (mh_msg_encode(ans, out, sizeof(out), &len) < 0)
		log_fatal("cannot encode answer to request %u", ans->id); /* our own bug */
	(void)send(peer, out, len, MSG_NOSIGNAL); /* rpcd gone: the answer goes with it */
}

/* Does req share an id or a path with a request in flight? */
static const struct slot *conflict(const struct mh_msg *req)
{
	const char *mine[MH_OPS_KEYS_MAX], *theirs[MH_OPS_KEYS_MAX];
	size_t nm = mh_ops_keys(req, mine);
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		if (slots[i].pid == 0 || slots[i].answered)
			continue;
		size_t nt = mh_ops_keys(&slots[i].req, theirs);
		for (size_t a = 0; a < nm; a++)
			for (size_t b = 0; b < nt; b++)
				if (mine[a][0] && strcmp(mine[a], theirs[b]) == 0)
					return &slots[i];
	}
	return NULL;
}

static void __attribute__((noreturn)) worker_main(const struct mh_ctx *c, const struct mh_msg *req,
                                                  int peer, int ctl, int done, pid_t parent)
{
	static struct mh_msg ans;
	uint8_t out[MH_MSG_MAX];
	size_t len;
	/* Die with the helper; if it is already gone, do nothing at all. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(2);
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		if (slots[i].pid != 0) {
			close(slots[i].fd); /* the other workers' pipes and pidfds are not ours */
			mh_closep(&slots[i].pidfd);
		}
	}
	if (ctl >= 0)
		close(ctl); /* the supervisor's channel: its end of file must mean the helper's */
	note_fd = done;
	if (mh_ops_handle(c, req, &ans) < 0 || mh_msg_encode(&ans, out, sizeof(out), &len) < 0)
		_exit(3);
	/* First release the ids (the main loop reads this before any new request)... */
	if (write(done, (char[]){MH_NOTE_DONE}, 1) != 1)
		_exit(3);
	/* ...then answer. */
	_exit(send(peer, out, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : 1);
}

void mh_worker_start(const struct mh_ctx *c, const struct mh_msg *req, int peer, int ctl)
{
	static struct mh_msg ans;
	const struct slot *busy = conflict(req);
	struct slot *s = NULL;
	char why[128];

	if (busy) {
		snprintf(why, sizeof(why), "another operation on this volume is in flight (%s)",
		         mh_type_name(busy->req.type));
		mh_ops_refuse(c, req, &ans, MH_E_BUSY, EBUSY, why);
		send_answer(peer, &ans);
		return;
	}
	for (size_t i = 0; i < MH_WORKERS_MAX && !s; i++)
		if (slots[i].pid == 0)
			s = &slots[i];
	if (!s) {
		mh_ops_refuse(c, req, &ans, MH_E_BUSY, EAGAIN, "too many operations in flight");
		send_answer(peer, &ans);
		return;
	}
	struct mh_space_hold hold;
	if (mh_space_reserve(c, req, &hold, why, sizeof(why)) < 0) {
		mh_ops_refuse(c, req, &ans, MH_E_NOSPACE, ENOSPC, why);
		send_answer(peer, &ans);
		return;
	}
	int pfd[2];
	pid_t parent = getpid(), pid = -1;
	fflush(NULL);
	if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) == 0) {
		pid = fork();
		if (pid == 0)
			worker_main(c, req, peer, ctl, pfd[1], parent);
		close(pfd[1]);
		if (pid < 0)
			close(pfd[0]);
	}
	if (pid < 0) {
		int err = errno;
		mh_space_settle(&hold);
		snprintf(why, sizeof(why), "cannot start a worker: %s", strerror(err));
		mh_ops_refuse(c, req, &ans, MH_E_FAILED, err, why);
		send_answer(peer, &ans);
		return;
	}
	s->pid = pid;
	/* Race-free: the worker cannot be reaped (and its pid reused) before we wait for it. */
	s->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	s->fd = pfd[0];
	s->answered = false;
	s->frozen_ms = 0;
	s->overdue = false;
	s->hold = hold;
	s->req = *req;
}

/* The volume a copy freezes, if the request is one. */
static const char *copy_source(const struct mh_msg *req)
{
	if (req->type == MH_REQ_SNAPSHOT)
		return req->u.snapshot.volume_id;
	if (req->type == MH_REQ_CLONE && req->u.clone.source_kind == MH_SRC_VOLUME)
		return req->u.clone.source_id;
	return NULL;
}

int mh_workers_timeout_ms(const struct mh_ctx *c)
{
	int64_t limit = (int64_t)pol_freeze_max_seconds(c->pol) * 1000, next = -1, now = now_ms();
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		if (slots[i].pid == 0 || slots[i].frozen_ms == 0 || slots[i].overdue)
			continue;
		int64_t left = slots[i].frozen_ms + limit - now;
		if (next < 0 || left < next)
			next = left < 0 ? 0 : left;
	}
	return next > INT32_MAX ? INT32_MAX : (int)next;
}

void mh_workers_enforce(const struct mh_ctx *c)
{
	int64_t limit = (int64_t)pol_freeze_max_seconds(c->pol) * 1000, now = now_ms();
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		struct slot *s = &slots[i];
		if (s->pid == 0 || s->frozen_ms == 0 || s->overdue || now - s->frozen_ms < limit)
			continue;
		/*
		 * A freeze never outlives its bound: the copy is abandoned (its
		 * worker killed, its temporary file removed by the next attempt) and
		 * the source thawed at once, whatever the worker was doing.
		 */
		s->overdue = true;
		if (s->pidfd >= 0)
			syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
		const char *src = copy_source(&s->req);
		if (src)
			mh_copy_thaw(c, src);
		log_kv(LOG_LVL_ERROR, "freeze_overdue", "op", mh_type_name(s->req.type),
		       "volume_id", src ? src : "", NULL);
	}
}

size_t mh_workers_pollfds(struct pollfd *p, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < MH_WORKERS_MAX && n < max; i++)
		if (slots[i].pid != 0)
			p[n++] = (struct pollfd){.fd = slots[i].fd, .events = POLLIN};
	return n;
}

void mh_workers_reap(const struct mh_ctx *c, int peer)
{
	static struct mh_msg ans;
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		struct slot *s = &slots[i];
		int st = 0;
		char b;
		if (s->pid == 0)
			continue;
		ssize_t n;
		while ((n = read(s->fd, &b, 1)) == 1) {
			if (b == MH_NOTE_DONE)
				s->answered = true; /* its answer is on its way: the ids are free */
			else
				s->frozen_ms = b == MH_NOTE_FROZEN ? now_ms() : 0;
		}
		if (n != 0)
			continue; /* running (EAGAIN) */
		/* End of file: the worker has exited (its last fd closed). */
		pid_t got;
		while ((got = waitpid(s->pid, &st, 0)) < 0 && errno == EINTR)
			;
		close(s->fd);
		mh_closep(&s->pidfd);
		s->pid = 0;
		mh_space_settle(&s->hold); /* count what the request really changed */
		if (s->answered && got > 0 && WIFEXITED(st) && WEXITSTATUS(st) <= 1)
			continue; /* answered (0), or rpcd was gone (1) */
		char why[160];
		if (s->overdue)
			snprintf(why, sizeof(why),
			         "the copy kept the source file system frozen longer than "
			         "freeze_max_seconds (%u s): abandoned, source thawed",
			         pol_freeze_max_seconds(c->pol));
		else if (got > 0 && WIFSIGNALED(st))
			snprintf(why, sizeof(why), "worker killed by signal %d", WTERMSIG(st));
		else
			snprintf(why, sizeof(why), "worker failed (status %d)",
			         got > 0 ? WEXITSTATUS(st) : -1);
		log_kv(LOG_LVL_ERROR, "worker_died", "op", mh_type_name(s->req.type), "reason", why,
		       NULL);
		/* A copy may have died with the source volume frozen: thaw it. */
		if (copy_source(&s->req))
			mh_copy_thaw(c, copy_source(&s->req));
		mh_ops_refuse(c, &s->req, &ans, MH_E_FAILED, 0, why);
		send_answer(peer, &ans);
	}
}
