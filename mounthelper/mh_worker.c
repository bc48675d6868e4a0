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
 * worker is forked with one end of a SOCK_SEQPACKET pair, and nothing else of
 * the helper's: not the request channel, not the supervisor's. It handles the
 * request (audit record included), sends its answer on the pair and exits.
 *
 * Exactly one answer per request, and only on the channel it was asked on.
 * Only the main loop writes to rpcd. It keeps a worker's answer until the
 * worker has exited and been reaped (end of file on the pair, then waitpid):
 * so when rpcd reads an answer, the worker holds no descriptor any more (a
 * mount it just made is not kept busy by its own maker when the next request
 * unmounts it), and the request's ids are released at that moment, before the
 * main loop reads another request. A worker that exits without an answer
 * (killed, crashed) is answered for with MH_E_FAILED; one that answered and
 * was then killed is answered for with what it said. Each worker remembers
 * the generation of the channel its request came on (mh_main.c counts them:
 * a new rpcd, a dropped channel); its answer goes out only if that channel is
 * still the current one, since a new rpcd never asked for it.
 *
 * A worker also notes on the pair (one-byte datagrams) when it freezes and
 * thaws a source file system: one that keeps it frozen longer than the
 * policy's freeze_max_seconds is killed and the file system thawed by the
 * main loop (mh_workers_enforce), so no freeze outlives its bound whatever
 * the copy does. If a worker that may have frozen a file system dies, the
 * main loop thaws it (mh_copy_thaw), and it removes the temporary file or the
 * unused loop device the worker may have left (mh_sweep).
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
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mh_copy.h"
#include "mh_ops.h"
#include "mh_pause.h"
#include "mh_space.h"

struct slot {
	pid_t pid;         /* 0: free */
	int pidfd;         /* the worker's pidfd: the only way the helper signals it */
	int fd;            /* the main loop's end of the worker's pair (O_NONBLOCK) */
	uint32_t gen;      /* the channel generation its request came on */
	int64_t frozen_ms; /* when it froze a source file system (NOTE_FROZEN), 0 if not frozen */
	bool overdue;      /* killed for holding a freeze too long */
	struct mh_space_hold hold; /* its claim on the data directory (mh_space.c) */
	struct mh_msg req;         /* what it is doing (its keys point in here) */
	size_t ans_len;            /* its encoded answer, once it has sent one; else 0 */
	uint8_t ans[MH_MSG_MAX];
};

static struct slot slots[MH_WORKERS_MAX];
static int note_fd = -1; /* in a worker: its end of the pair */

void mh_worker_note(char what)
{
	if (note_fd >= 0)
		(void)!send(note_fd, &what, 1, MSG_NOSIGNAL);
}

size_t mh_workers_count(void)
{
	size_t n = 0;
	for (size_t i = 0; i < MH_WORKERS_MAX; i++)
		n += slots[i].pid != 0;
	return n;
}

static void send_encoded(int peer, const uint8_t *out, size_t len)
{
	if (peer >= 0)
		(void)send(peer, out, len, MSG_NOSIGNAL); /* rpcd gone: the answer goes with it */
}

static void send_answer(int peer, const struct mh_msg *ans)
{
	uint8_t out[MH_MSG_MAX];
	size_t len;
	if (mh_msg_encode(ans, out, sizeof(out), &len) < 0)
		log_fatal("cannot encode answer to request %u", ans->id); /* our own bug */
	send_encoded(peer, out, len);
}

/* Does req share an id or a path with a request in flight (answered or not: rpcd has not seen it)?
 */
static const struct slot *conflict(const struct mh_msg *req)
{
	const char *mine[MH_OPS_KEYS_MAX], *theirs[MH_OPS_KEYS_MAX];
	size_t nm = mh_ops_keys(req, mine);
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		if (slots[i].pid == 0)
			continue;
		size_t nt = mh_ops_keys(&slots[i].req, theirs);
		for (size_t a = 0; a < nm; a++)
			for (size_t b = 0; b < nt; b++)
				if (mine[a][0] && strcmp(mine[a], theirs[b]) == 0)
					return &slots[i];
	}
	return NULL;
}

bool mh_workers_hold(const char *key)
{
	const char *theirs[MH_OPS_KEYS_MAX];
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		if (slots[i].pid == 0)
			continue;
		size_t nt = mh_ops_keys(&slots[i].req, theirs);
		for (size_t b = 0; b < nt; b++)
			if (strcmp(key, theirs[b]) == 0)
				return true;
	}
	return false;
}

static void __attribute__((noreturn)) worker_main(const struct mh_ctx *c, const struct mh_msg *req,
                                                  int peer, int ctl, int sock, pid_t parent)
{
	static struct mh_msg ans;
	uint8_t out[MH_MSG_MAX];
	size_t len;
	/* Die with the helper; if it is already gone, do nothing at all. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(2);
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		if (slots[i].pid != 0) {
			close(slots[i].fd); /* the other workers' pairs and pidfds are not ours */
			mh_closep(&slots[i].pidfd);
		}
	}
	/* Only the main loop speaks to rpcd and to the supervisor. */
	if (peer >= 0)
		close(peer);
	if (ctl >= 0)
		close(ctl);
	note_fd = sock;
	if (mh_ops_handle(c, req, &ans) < 0 || mh_msg_encode(&ans, out, sizeof(out), &len) < 0)
		_exit(3);
	if (send(sock, out, len, MSG_NOSIGNAL) != (ssize_t)len)
		_exit(3);
	const char *keys[MH_OPS_KEYS_MAX];
	mh_pause(c, "answered", mh_ops_keys(req, keys) ? keys[0] : NULL); /* tests: killed now */
	_exit(0);
}

void mh_worker_start(const struct mh_ctx *c, const struct mh_msg *req, int peer, uint32_t gen,
                     int ctl)
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
	int sp[2];
	pid_t parent = getpid(), pid = -1;
	fflush(NULL);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0) {
		pid = fork();
		if (pid == 0) {
			close(sp[0]);
			worker_main(c, req, peer, ctl, sp[1], parent);
		}
		close(sp[1]);
		if (pid < 0)
			close(sp[0]);
	}
	if (pid < 0) {
		int err = errno;
		mh_space_settle(&hold);
		snprintf(why, sizeof(why), "cannot start a worker: %s", strerror(err));
		mh_ops_refuse(c, req, &ans, MH_E_FAILED, err, why);
		send_answer(peer, &ans);
		return;
	}
	(void)fcntl(sp[0], F_SETFL, O_NONBLOCK);
	s->pid = pid;
	/* Race-free: the worker cannot be reaped (and its pid reused) before we wait for it. */
	s->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	s->fd = sp[0];
	s->gen = gen;
	s->frozen_ms = 0;
	s->overdue = false;
	s->hold = hold;
	s->req = *req;
	s->ans_len = 0;
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
	int64_t limit = (int64_t)pol_freeze_max_seconds(c->pol) * 1000, next = -1, now = mono_ms();
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
	int64_t limit = (int64_t)pol_freeze_max_seconds(c->pol) * 1000, now = mono_ms();
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

/* What the worker sent so far: notes, and its answer. Returns recv's last result. */
static ssize_t read_worker(struct slot *s)
{
	static uint8_t scratch[MH_MSG_MAX]; /* later answers, read and dropped */
	for (;;) {
		ssize_t n;
		uint8_t *buf = s->ans_len ? scratch : s->ans; /* one answer per worker, the first */
		n = recv(s->fd, buf, MH_MSG_MAX, MSG_DONTWAIT);
		if (n == 1)
			s->frozen_ms = buf[0] == MH_NOTE_FROZEN ? mono_ms() : 0;
		else if (n > 1 && !s->ans_len)
			s->ans_len = (size_t)n;
		else if (n <= 0 && !(n < 0 && errno == EINTR))
			return n;
	}
}

/* The worker ended without an answer: say why, undo what it may have left. */
static void answer_for_dead(const struct mh_ctx *c, struct slot *s, pid_t got, int st)
{
	static struct mh_msg ans;
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
	log_kv(LOG_LVL_ERROR, "worker_died", "op", mh_type_name(s->req.type), "reason", why, NULL);
	/* A copy may have died with the source volume frozen: thaw it. */
	if (copy_source(&s->req))
		mh_copy_thaw(c, copy_source(&s->req));
	mh_sweep(c, mh_workers_hold); /* its temporary file or loop device, if it left one */
	mh_ops_refuse(c, &s->req, &ans, MH_E_FAILED, 0, why);
	if (mh_msg_encode(&ans, s->ans, sizeof(s->ans), &s->ans_len) < 0)
		log_fatal("cannot encode answer to request %u", ans.id); /* our own bug */
}

void mh_workers_reap(const struct mh_ctx *c, int peer, uint32_t gen)
{
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		struct slot *s = &slots[i];
		int st = 0;
		if (s->pid == 0 || read_worker(s) != 0)
			continue; /* free, or running (EAGAIN) */
		/* End of file: the worker has exited; once reaped it holds nothing at all. */
		pid_t got;
		while ((got = waitpid(s->pid, &st, 0)) < 0 && errno == EINTR)
			;
		close(s->fd);
		mh_closep(&s->pidfd);
		s->pid = 0;                /* its ids are free from here on */
		mh_space_settle(&s->hold); /* count what the request really changed */
		if (!s->ans_len)
			answer_for_dead(c, s, got, st);
		if (s->gen == gen)
			send_encoded(peer, s->ans, s->ans_len);
		else
			log_kv(LOG_LVL_INFO, "answer_dropped", "op", mh_type_name(s->req.type),
			       "reason", "asked on a channel that has been replaced", NULL);
	}
}
