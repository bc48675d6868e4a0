/*
 * rpcd's end of the helper channel (see mh_client.h). Runs in rpcd,
 * unprivileged, on any number of gRPC worker threads at once.
 *
 * Each call takes a request id, registers a waiter, sends one datagram and
 * sleeps until its answer arrives, or its deadline passes (deadline_s: a
 * helper stuck in the kernel must not hold its callers for ever). A call that
 * gives up leaves its waiter behind, marked abandoned, so that the late
 * answer is taken and dropped rather than read as one nobody asked for. One reader thread per
 * channel receives every answer and wakes the waiter with the same id, so slow operations may
 * complete out of order. The helper is privileged but still a separate
 * process: an answer we did not ask for, of the wrong type, or that does not
 * decode is a protocol violation; we then log it and break the channel rather
 * than guess. A broken channel fails every waiter and every later call with
 * MH_E_UNAVAILABLE at once, until mh_client_set_fd() installs a new one.
 *
 * The typed calls (mh_create(), mh_stage(), ...) are mh_client_ops.c.
 *
 * Locks: mu guards all state; send_mu serialises send() and is held whenever
 * an fd is closed, so a sender never writes to a closed or reused fd; life_mu
 * serialises channel replacement and teardown (joining the reader thread).
 */
#include "mh_client.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mh_client_int.h"
#include "mh_proto_all.h"

struct waiter {
	uint32_t id;
	uint16_t want;  /* the MH_ANS_X that answers this request */
	bool done;      /* set by the reader or by a channel failure */
	bool ok;        /* done with an answer in ans (else: channel failed) */
	bool abandoned; /* its caller gave up: whoever takes it off the list frees it */
	struct mh_msg ans;
	pthread_cond_t cv;
	struct waiter *next;
};

struct mh_client {
	pthread_mutex_t mu;
	pthread_mutex_t send_mu;
	pthread_mutex_t life_mu;
	pthread_cond_t idle; /* signalled when inflight drops to 0 */
	int fd;              /* -1: no channel */
	bool broken;         /* channel saw EOF, an error or a violation */
	bool closing;        /* mh_client_free() has begun */
	bool has_reader;
	pthread_t reader;
	uint32_t next_id;
	unsigned deadline[3];   /* seconds: quick, work, copy (deadline_s) */
	unsigned inflight;      /* calls inside call(); free waits for 0 */
	struct waiter *waiters; /* pending calls on the current channel */
	/* CLOCK_MONOTONIC ms of the last answer on the current channel; 0: none yet. */
	int64_t answered_ms;
	/* Calls that failed, by request type and kind, for metrics (mh_client_errors). */
	_Atomic uint64_t failed[MH_CLIENT_TYPES][MH_CLIENT_KINDS];
};

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (p == NULL)
		abort();
	return p;
}

void mh_client_set_err(struct mh_err *err, enum mh_err_kind kind, int sys_errno, const char *reason)
{
	if (err == NULL)
		return;
	err->kind = kind;
	err->sys_errno = sys_errno;
	snprintf(err->reason, sizeof(err->reason), "%s", reason);
}

static void waiter_free(struct waiter *w)
{
	pthread_cond_destroy(&w->cv);
	free(w);
}

/* Fail every pending call and refuse new ones. Caller holds mu. */
static void break_locked(struct mh_client *c)
{
	struct waiter *w;

	c->broken = true;
	while ((w = c->waiters) != NULL) {
		c->waiters = w->next;
		if (w->abandoned) {
			waiter_free(w);
			continue;
		}
		w->done = true;
		w->ok = false;
		pthread_cond_signal(&w->cv);
	}
}

/* A protocol violation by the helper: log, break, and shut the socket so the helper sees EOF. */
static void violation_locked(struct mh_client *c, int fd, const char *what, const struct mh_msg *m)
{
	if (m != NULL)
		log_error("helper protocol violation: %s (type %s, id %u); closing channel", what,
		          mh_type_name(m->type), m->id);
	else
		log_error("helper protocol violation: %s; closing channel", what);
	break_locked(c);
	shutdown(fd, SHUT_RDWR);
}

/* Hand one decoded answer to its waiter. Caller holds mu. Returns -1 on a violation. */
static int deliver_locked(struct mh_client *c, int fd, const struct mh_msg *m)
{
	struct waiter **pp;

	for (pp = &c->waiters; *pp != NULL; pp = &(*pp)->next) {
		struct waiter *w = *pp;

		if (w->id != m->id)
			continue;
		if (m->type != w->want && m->type != MH_ANS_ERROR) {
			violation_locked(c, fd, "answer of the wrong type", m);
			return -1;
		}
		*pp = w->next;
		c->answered_ms = mono_ms();
		if (w->abandoned) { /* late: its caller has gone with DEADLINE_EXCEEDED */
			log_warn("helper answered request %u (%s) after its deadline", m->id,
			         mh_type_name(m->type));
			waiter_free(w);
			return 0;
		}
		w->ans = *m;
		w->done = true;
		w->ok = true;
		pthread_cond_signal(&w->cv);
		return 0;
	}
	violation_locked(c, fd, "answer for no pending request", m);
	return -1;
}

/*
 * One per channel. Its fd stays open until drop_channel() has joined it, and
 * once the channel is broken it leaves without touching the client again.
 */
static void *reader_main(void *arg)
{
	struct mh_client *c = arg;
	uint8_t *buf = xcalloc(1, MH_MSG_MAX);
	struct mh_msg *m = xcalloc(1, sizeof(*m));

	pthread_mutex_lock(&c->mu);
	int fd = c->fd;
	pthread_mutex_unlock(&c->mu);
	while (fd >= 0) {
		/* MSG_TRUNC returns the datagram's real size, so an oversized one is caught. */
		ssize_t n = recv(fd, buf, MH_MSG_MAX, MSG_TRUNC);
		int saved = errno;

		if (n < 0 && saved == EINTR)
			continue;
		pthread_mutex_lock(&c->mu);
		if (c->broken) { /* replaced or shut down meanwhile: nothing to report */
			pthread_mutex_unlock(&c->mu);
			break;
		}
		if (n <= 0) {
			log_warn("helper channel closed: %s", n < 0 ? strerror(saved) : "EOF");
			break_locked(c);
		} else if ((size_t)n > MH_MSG_MAX || mh_msg_decode(buf, (size_t)n, m) < 0) {
			violation_locked(c, fd, "oversized or undecodable message", NULL);
		} else if (m->type % 2 != 0 && m->type != MH_ANS_ERROR) {
			/* Requests have odd types; answers are even (or MH_ANS_ERROR). */
			violation_locked(c, fd, "request sent to rpcd", m);
		} else if (deliver_locked(c, fd, m) == 0) {
			pthread_mutex_unlock(&c->mu);
			continue;
		}
		pthread_mutex_unlock(&c->mu);
		break;
	}
	free(m);
	free(buf);
	return NULL;
}

/*
 * Take down the current channel: fail its waiters, wake its reader with
 * shutdown(), join it, and close the fd under send_mu. Caller holds life_mu.
 */
static void drop_channel(struct mh_client *c)
{
	pthread_mutex_lock(&c->mu);
	int fd = c->fd;
	bool had_reader = c->has_reader;
	pthread_t reader = c->reader;

	break_locked(c);
	c->fd = -1;
	c->has_reader = false;
	pthread_mutex_unlock(&c->mu);

	if (fd >= 0)
		shutdown(fd, SHUT_RDWR);
	if (had_reader)
		pthread_join(reader, NULL);
	if (fd >= 0) {
		pthread_mutex_lock(&c->send_mu);
		close(fd);
		pthread_mutex_unlock(&c->send_mu);
	}
}

/* Install fd as the new channel. Caller holds life_mu; there is no channel now. */
static void install_channel(struct mh_client *c, int fd)
{
	if (fd < 0)
		return;
	/* The reader blocks in recv() by design; a non-blocking fd would spin it. */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && (fl & O_NONBLOCK))
		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);

	/* The reader only recv()s: it never takes a signal meant for rpcd's own handlers. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_mutex_lock(&c->mu);
	c->fd = fd;
	c->broken = false;
	c->answered_ms = 0;
	if (pthread_create(&c->reader, NULL, reader_main, c) != 0)
		abort();
	c->has_reader = true;
	pthread_mutex_unlock(&c->mu);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

struct mh_client *mh_client_new(int fd)
{
	struct mh_client *c = xcalloc(1, sizeof(*c));

	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->send_mu, NULL);
	pthread_mutex_init(&c->life_mu, NULL);
	pthread_cond_init(&c->idle, NULL);
	c->fd = -1;
	c->broken = true;
	c->deadline[0] = MH_DEADLINE_QUICK_S;
	c->deadline[1] = MH_DEADLINE_WORK_S;
	c->deadline[2] = MH_DEADLINE_COPY_S;
	install_channel(c, fd);
	return c;
}

void mh_client_free(struct mh_client *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->life_mu);
	pthread_mutex_lock(&c->mu);
	c->closing = true;
	pthread_mutex_unlock(&c->mu);
	drop_channel(c);
	pthread_mutex_unlock(&c->life_mu);

	/* Calls woken by drop_channel() may still be on their way out of call(). */
	pthread_mutex_lock(&c->mu);
	while (c->inflight > 0)
		pthread_cond_wait(&c->idle, &c->mu);
	pthread_mutex_unlock(&c->mu);

	pthread_cond_destroy(&c->idle);
	pthread_mutex_destroy(&c->life_mu);
	pthread_mutex_destroy(&c->send_mu);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

void mh_client_set_fd(struct mh_client *c, int fd)
{
	pthread_mutex_lock(&c->life_mu);
	drop_channel(c);
	install_channel(c, fd);
	pthread_mutex_unlock(&c->life_mu);
}

bool mh_client_connected(struct mh_client *c)
{
	pthread_mutex_lock(&c->mu);
	bool up = c->fd >= 0 && !c->broken;
	pthread_mutex_unlock(&c->mu);
	return up;
}

bool mh_client_answered_within(struct mh_client *c, int64_t ms)
{
	pthread_mutex_lock(&c->mu);
	bool yes = c->fd >= 0 && !c->broken && c->answered_ms && mono_ms() - c->answered_ms <= ms;
	pthread_mutex_unlock(&c->mu);
	return yes;
}

/*
 * Send on the current channel unless our waiter has already been failed. Fds
 * are closed only under send_mu, so while we hold it c->fd is either the fd we
 * send on or -1 (being dropped): a failure can never break a newer channel.
 */
static void send_request(struct mh_client *c, struct waiter *w, const uint8_t *buf, size_t len)
{
	pthread_mutex_lock(&c->send_mu);
	pthread_mutex_lock(&c->mu);
	int fd = w->done ? -1 : c->fd;
	pthread_mutex_unlock(&c->mu);

	if (fd >= 0) {
		ssize_t n;

		do
			n = send(fd, buf, len, MSG_NOSIGNAL);
		while (n < 0 && errno == EINTR);
		if (n < 0 || (size_t)n != len) {
			int saved = n < 0 ? errno : EMSGSIZE;

			pthread_mutex_lock(&c->mu);
			if (!c->broken && c->fd == fd) {
				log_warn("helper channel send failed: %s", strerror(saved));
				break_locked(c);
				shutdown(fd, SHUT_RDWR);
			}
			pthread_mutex_unlock(&c->mu);
		}
	}
	pthread_mutex_unlock(&c->send_mu);
}

/*
 * How long a call waits for its answer. Reads are quick; a copy without
 * reflink moves a whole volume's data; everything else (mkfs, mounts, an
 * online resize) lies between.
 */
static unsigned deadline_s(struct mh_client *c, uint16_t type)
{
	switch (type) {
	case MH_REQ_PING:
	case MH_REQ_CAPACITY:
	case MH_REQ_STATS:
	case MH_REQ_LIST:
	case MH_REQ_DIR_STATS:
	case MH_REQ_DIR_CAPACITY:
	case MH_REQ_DIR_NODE:
		return c->deadline[0];
	case MH_REQ_SNAPSHOT:
	case MH_REQ_GROUP_SNAPSHOT:
	case MH_REQ_CLONE:
	case MH_REQ_DIR_CREATE: /* may copy a snapshot or a volume */
	case MH_REQ_DIR_SNAPSHOT:
	case MH_REQ_DIR_DELETE: /* a large tree takes a while to remove */
		return c->deadline[2];
	default:
		return c->deadline[1];
	}
}

void mh_client_set_deadlines(struct mh_client *c, unsigned quick_s, unsigned work_s,
                             unsigned copy_s)
{
	pthread_mutex_lock(&c->mu);
	c->deadline[0] = quick_s;
	c->deadline[1] = work_s;
	c->deadline[2] = copy_s;
	pthread_mutex_unlock(&c->mu);
}

/* Take w off the pending list if it is still there. Caller holds mu. */
static void unlink_locked(struct mh_client *c, struct waiter *w)
{
	for (struct waiter **pp = &c->waiters; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			return;
		}
	}
}

/*
 * Send the request in *m and wait for the answer of type want (or
 * MH_ANS_ERROR). Returns 0 with the answer in *m, or -1 with *err filled.
 */
int mh_client_call(struct mh_client *c, struct mh_msg *m, uint16_t want, struct mh_err *err)
{
	struct waiter *w = xcalloc(1, sizeof(*w));
	uint8_t *buf = xcalloc(1, MH_MSG_MAX);
	size_t len;
	int rc = -1;

	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_lock(&c->mu);
	c->inflight++;
	if (c->fd < 0 || c->broken || c->closing) {
		pthread_mutex_unlock(&c->mu);
		mh_client_set_err(err, MH_E_UNAVAILABLE, 0, "helper unavailable");
		goto out;
	}
	/* Ids are never 0 and never shared with a pending call, even after wrapping. */
	for (bool taken = true; taken;) {
		if (++c->next_id == 0)
			c->next_id = 1;
		taken = false;
		for (struct waiter *o = c->waiters; o != NULL; o = o->next)
			taken = taken || o->id == c->next_id;
	}
	w->id = m->id = c->next_id;
	w->want = want;
	w->next = c->waiters;
	c->waiters = w;
	pthread_mutex_unlock(&c->mu);

	if (mh_msg_encode(m, buf, MH_MSG_MAX, &len) < 0) {
		pthread_mutex_lock(&c->mu);
		unlink_locked(c, w);
		pthread_mutex_unlock(&c->mu);
		mh_client_set_err(err, MH_E_REFUSED, 0, "request has a field out of bounds");
		goto out;
	}

	unsigned deadline = deadline_s(c, m->type);
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += deadline;
	send_request(c, w, buf, len);

	pthread_mutex_lock(&c->mu);
	while (!w->done)
		if (pthread_cond_timedwait(&w->cv, &c->mu, &until) == ETIMEDOUT)
			break;
	if (!w->done) {
		w->abandoned = true; /* the reader, or the channel's end, frees it */
		pthread_mutex_unlock(&c->mu);
		log_warn("helper gave no answer to request %u (%s) within %u s", w->id,
		         mh_type_name(m->type), deadline);
		mh_client_set_err(err, MH_E_TIMEOUT, ETIMEDOUT,
		                  "the helper did not answer in time");
		w = NULL;
		goto out;
	}
	pthread_mutex_unlock(&c->mu);

	if (!w->ok) {
		mh_client_set_err(err, MH_E_UNAVAILABLE, 0, "helper unavailable");
	} else if (w->ans.type == MH_ANS_ERROR) {
		mh_client_set_err(err, (enum mh_err_kind)w->ans.u.error.kind,
		                  (int)w->ans.u.error.sys_errno, w->ans.u.error.reason);
	} else {
		mh_client_set_err(err, MH_E_OK, 0, "");
		*m = w->ans;
		rc = 0;
	}
out:
	if (rc != 0 && err && m->type < MH_CLIENT_TYPES && (unsigned)err->kind < MH_CLIENT_KINDS)
		atomic_fetch_add(&c->failed[m->type][err->kind], 1);
	if (w)
		waiter_free(w);
	free(buf);
	pthread_mutex_lock(&c->mu);
	if (--c->inflight == 0)
		pthread_cond_broadcast(&c->idle);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void mh_client_errors(struct mh_client *c, mh_client_error_fn *fn, void *arg)
{
	for (uint16_t t = 0; t < MH_CLIENT_TYPES; t++)
		for (unsigned k = 0; k < MH_CLIENT_KINDS; k++) {
			uint64_t n = atomic_load(&c->failed[t][k]);
			if (n)
				fn(arg, t, (enum mh_err_kind)k, n);
		}
}
