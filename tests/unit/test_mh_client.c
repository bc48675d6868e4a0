/*
 * Unit tests for rpcd's helper client (controller/mh_client.c) against a fake
 * helper thread on the other end of a SOCK_SEQPACKET socketpair: answers,
 * error answers, out-of-order answers, every kind of protocol violation (the
 * channel must break), the helper vanishing mid-call (the call must fail
 * promptly with MH_E_UNAVAILABLE), and recovery through mh_client_set_fd().
 * alarm() turns any hang into a failure.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mh_client.h"
#include "mh_proto_all.h"
#include "tap.h"

enum mode {
	H_NORMAL,     /* answer everything */
	H_REVERSE2,   /* hold the first request, answer the second, then the first */
	H_WRONG_ID,   /* answer with an id nobody asked for */
	H_WRONG_TYPE, /* answer with a success type that does not match */
	H_REQUEST,    /* send a request back instead of an answer */
	H_GARBAGE,    /* send bytes that do not decode */
	H_OVERSIZE,   /* send a datagram longer than MH_MSG_MAX */
	H_CLOSE,      /* close the channel on the first request, without answering */
	H_HOLD,       /* never answer */
	H_LATE,       /* answer the first request only when the second comes, before it */
};

struct helper {
	int fd;        /* the helper's end */
	int client_fd; /* the end handed to the client */
	enum mode mode;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int nreq;
	struct mh_msg last;
};

static void send_msg(int fd, const struct mh_msg *m)
{
	uint8_t buf[MH_MSG_MAX];
	size_t len;

	if (mh_msg_encode(m, buf, sizeof(buf), &len) < 0)
		abort();
	(void)send(fd, buf, len, MSG_NOSIGNAL);
}

/* What a well-behaved helper answers. */
static void answer_for(const struct mh_msg *req, struct mh_msg *ans)
{
	memset(ans, 0, sizeof(*ans));
	ans->id = req->id;
	ans->type = (uint16_t)(req->type + 1);
	if (req->type == MH_REQ_CREATE && strcmp(req->u.create.volume_id, "full") == 0) {
		ans->type = MH_ANS_ERROR;
		ans->u.error.kind = MH_E_NOSPACE;
		ans->u.error.sys_errno = ENOSPC;
		strcpy(ans->u.error.reason, "data directory full");
	} else if (req->type == MH_REQ_CREATE) {
		ans->u.size_ans.size_bytes = req->u.create.size_bytes + 4096;
	} else if (req->type == MH_REQ_RESIZE || req->type == MH_REQ_EXPAND) {
		ans->u.size_ans.size_bytes = 3 << 20;
	} else if (req->type == MH_REQ_SNAPSHOT || req->type == MH_REQ_CLONE) {
		ans->u.copy_ans.size_bytes = 5 << 20;
		ans->u.copy_ans.reflinked = req->type == MH_REQ_CLONE;
	} else if (req->type == MH_REQ_CAPACITY) {
		ans->u.capacity_ans.available_bytes = 7;
		ans->u.capacity_ans.total_bytes = 9;
		ans->u.capacity_ans.reflink = 1;
	} else if (req->type == MH_REQ_STATS) {
		ans->u.stats_ans.bytes_total = 100;
		ans->u.stats_ans.bytes_used = 40;
		ans->u.stats_ans.bytes_available = 60;
		ans->u.stats_ans.abnormal = 1;
		strcpy(ans->u.stats_ans.message, "loop device detached");
	} else if (req->type == MH_REQ_DELETE_SNAPSHOT &&
	           strcmp(req->u.del_snapshot.snapshot_id, "busy") == 0) {
		ans->type = MH_ANS_ERROR;
		ans->u.error.kind = MH_E_BUSY;
		ans->u.error.sys_errno = EBUSY;
		strcpy(ans->u.error.reason, "operation in flight");
	} else if (req->type == MH_REQ_DELETE && strcmp(req->u.del.volume_id, "missing") == 0) {
		ans->type = MH_ANS_ERROR;
		ans->u.error.kind = MH_E_NOTFOUND;
		ans->u.error.sys_errno = ENOENT;
		strcpy(ans->u.error.reason, "no such volume");
	}
}

static void *helper_main(void *arg)
{
	struct helper *h = arg;
	uint8_t buf[MH_MSG_MAX + 1];
	struct mh_msg req, ans, held = {0};

	for (;;) {
		ssize_t n = recv(h->fd, buf, sizeof(buf), 0);
		if (n <= 0 || mh_msg_decode(buf, (size_t)n, &req) < 0)
			break;
		pthread_mutex_lock(&h->mu);
		int nth = ++h->nreq;
		h->last = req;
		pthread_cond_broadcast(&h->cv);
		pthread_mutex_unlock(&h->mu);

		answer_for(&req, &ans);
		switch (h->mode) {
		case H_NORMAL:
			send_msg(h->fd, &ans);
			break;
		case H_REVERSE2:
			if (nth == 1) {
				held = ans;
				break;
			}
			send_msg(h->fd, &ans);
			if (nth == 2)
				send_msg(h->fd, &held);
			break;
		case H_WRONG_ID:
			ans.id ^= 0x5a5a0000;
			send_msg(h->fd, &ans);
			break;
		case H_WRONG_TYPE:
			ans.type = req.type == MH_REQ_STAGE ? MH_ANS_PUBLISH : MH_ANS_STAGE;
			send_msg(h->fd, &ans);
			break;
		case H_REQUEST:
			ans.type = MH_REQ_PING;
			send_msg(h->fd, &ans);
			break;
		case H_GARBAGE:
			(void)send(h->fd, "\x00\x01\x00\x02garbage", 11, MSG_NOSIGNAL);
			break;
		case H_OVERSIZE:
			memset(buf, 0, sizeof(buf));
			(void)send(h->fd, buf, MH_MSG_MAX + 1, MSG_NOSIGNAL);
			break;
		case H_CLOSE:
			close(h->fd);
			h->fd = -1;
			return NULL;
		case H_HOLD:
			break;
		case H_LATE:
			if (nth == 1) {
				held = ans;
				break;
			}
			if (nth == 2)
				send_msg(h->fd, &held);
			send_msg(h->fd, &ans);
			break;
		}
	}
	close(h->fd);
	h->fd = -1;
	return NULL;
}

static struct helper *helper_start(enum mode mode)
{
	struct helper *h = calloc(1, sizeof(*h));
	int sv[2];

	if (h == NULL || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	h->client_fd = sv[0];
	h->fd = sv[1];
	h->mode = mode;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	if (pthread_create(&h->th, NULL, helper_main, h) != 0)
		abort();
	return h;
}

/* Wait until the helper has received n requests (alarm() bounds the wait). */
static void helper_wait(struct helper *h, int n)
{
	pthread_mutex_lock(&h->mu);
	while (h->nreq < n)
		pthread_cond_wait(&h->cv, &h->mu);
	pthread_mutex_unlock(&h->mu);
}

/* The last request the helper received. */
static struct mh_msg helper_last(struct helper *h)
{
	pthread_mutex_lock(&h->mu);
	struct mh_msg m = h->last;
	pthread_mutex_unlock(&h->mu);
	return m;
}

static int helper_nreq(struct helper *h)
{
	pthread_mutex_lock(&h->mu);
	int n = h->nreq;
	pthread_mutex_unlock(&h->mu);
	return n;
}

/* Joins the helper: it leaves when the client closes or shuts down the channel. */
static void helper_stop(struct helper *h)
{
	pthread_join(h->th, NULL);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool unavailable(int rc, const struct mh_err *e)
{
	return rc == -1 && e->kind == MH_E_UNAVAILABLE &&
	       strcmp(e->reason, "helper unavailable") == 0;
}

static void test_no_channel(void)
{
	struct mh_client *c = mh_client_new(-1);
	struct mh_err e;

	CHECK(!mh_client_connected(c));
	CHECK(unavailable(mh_ping(c, &e), &e));
	mh_client_free(c);
	mh_client_free(NULL);
}

/* Protocol v2: the new fields pass through, the new answers come back. */
static void test_answers_v2(struct mh_client *c, struct helper *h)
{
	struct mh_err e;
	struct mh_msg last;
	uint64_t size = 0;

	struct mh_req_stage st = {
	    .readonly = 0, .flags = MH_F_MOUNT_GROUP | MH_F_CREATE_DIR, .gid = 4242};
	strcpy(st.volume_id, "pvc-2");
	strcpy(st.staging_path, "/var/lib/kubelet/e");
	strcpy(st.fs_type, "xfs");
	strcpy(st.mkfs_options, "-K");
	CHECK(mh_stage(c, &st, &e) == 0);
	last = helper_last(h);
	/* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): both zeroed first */
	CHECK(last.type == MH_REQ_STAGE && memcmp(&last.u.stage, &st, sizeof(st)) == 0);
	CHECK(mh_unstage_flags(c, "pvc-2", "/var/lib/kubelet/e", MH_F_REMOVE_DIR | MH_F_BLOCK,
	                       &e) == 0);
	last = helper_last(h);
	CHECK(last.type == MH_REQ_UNSTAGE &&
	      last.u.unstage.flags == (MH_F_REMOVE_DIR | MH_F_BLOCK));
	CHECK(mh_unstage(c, "pvc-2", "/var/lib/kubelet/e", &e) == 0 &&
	      helper_last(h).u.unstage.flags == 0);
	struct mh_req_publish pb = {.readonly = 1, .flags = MH_F_BLOCK};
	strcpy(pb.volume_id, "pvc-2");
	strcpy(pb.staging_path, "/var/lib/kubelet/e");
	strcpy(pb.target_path, "/var/lib/kubelet/f");
	CHECK(mh_publish(c, &pb, &e) == 0);
	last = helper_last(h);
	CHECK(last.type == MH_REQ_PUBLISH && memcmp(&last.u.publish, &pb, sizeof(pb)) == 0);

	CHECK(mh_resize(c, "pvc-2", 3 << 20, &size, &e) == 0 && size == 3 << 20);
	last = helper_last(h);
	CHECK(last.type == MH_REQ_RESIZE && last.u.resize.size_bytes == 3 << 20);
	CHECK(mh_resize(c, "pvc-2", 3 << 20, NULL, &e) == 0);

	struct mh_ans_copy cp = {0};
	CHECK(mh_snapshot(c, "ss-1", "pvc-2", &cp, &e) == 0 && cp.size_bytes == 5 << 20 &&
	      cp.reflinked == 0);
	last = helper_last(h);
	CHECK(last.type == MH_REQ_SNAPSHOT && strcmp(last.u.snapshot.snapshot_id, "ss-1") == 0 &&
	      strcmp(last.u.snapshot.volume_id, "pvc-2") == 0);
	CHECK(mh_delete_snapshot(c, "ss-1", &e) == 0);
	CHECK(mh_delete_snapshot(c, "busy", &e) == -1 && e.kind == MH_E_BUSY &&
	      e.sys_errno == EBUSY && strcmp(e.reason, "operation in flight") == 0);

	struct mh_req_clone cl = {.source_kind = MH_SRC_SNAPSHOT, .size_bytes = 6 << 20};
	strcpy(cl.volume_id, "pvc-3");
	strcpy(cl.source_id, "ss-1");
	CHECK(mh_clone(c, &cl, &cp, &e) == 0 && cp.reflinked == 1 && cp.size_bytes == 5 << 20);
	last = helper_last(h);
	/* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): both zeroed first */
	CHECK(last.type == MH_REQ_CLONE && memcmp(&last.u.clone, &cl, sizeof(cl)) == 0);
	cl.source_kind = 7; /* not encodable: refused before it is sent */
	int before = helper_nreq(h);
	CHECK(mh_clone(c, &cl, &cp, &e) == -1 && e.kind == MH_E_REFUSED);
	CHECK(helper_nreq(h) == before);

	struct mh_ans_capacity cap = {0};
	CHECK(mh_capacity(c, &cap, &e) == 0 && cap.available_bytes == 7 && cap.total_bytes == 9 &&
	      cap.reflink == 1);
	CHECK(helper_last(h).type == MH_REQ_CAPACITY);

	struct mh_req_expand ex = {.flags = MH_F_BLOCK};
	strcpy(ex.volume_id, "pvc-2");
	strcpy(ex.staging_path, "/var/lib/kubelet/e");
	CHECK(mh_expand(c, &ex, &size, &e) == 0 && size == 3 << 20);
	last = helper_last(h);
	CHECK(last.type == MH_REQ_EXPAND && memcmp(&last.u.expand, &ex, sizeof(ex)) == 0);
	ex.flags = 0x40; /* unknown bit: refused locally */
	before = helper_nreq(h);
	CHECK(mh_expand(c, &ex, &size, &e) == -1 && e.kind == MH_E_REFUSED);
	CHECK(helper_nreq(h) == before);

	struct mh_req_stats sq = {.flags = 0};
	struct mh_ans_stats sa = {0};
	strcpy(sq.volume_id, "pvc-2");
	strcpy(sq.path, "/var/lib/kubelet/f");
	CHECK(mh_stats(c, &sq, &sa, &e) == 0 && sa.bytes_total == 100 && sa.bytes_used == 40 &&
	      sa.bytes_available == 60 && sa.abnormal == 1 &&
	      strcmp(sa.message, "loop device detached") == 0);
	last = helper_last(h);
	CHECK(last.type == MH_REQ_STATS && memcmp(&last.u.stats, &sq, sizeof(sq)) == 0);
	before = helper_nreq(h);
	char longid[MH_ID_MAX + 2];
	memset(longid, 's', sizeof(longid) - 1);
	longid[MH_ID_MAX + 1] = '\0';
	CHECK(mh_snapshot(c, longid, "pvc-2", NULL, &e) == -1 && e.kind == MH_E_REFUSED &&
	      strstr(e.reason, "snapshot_id") != NULL);
	CHECK(mh_delete_snapshot(c, NULL, &e) == -1 && e.kind == MH_E_REFUSED);
	CHECK(helper_nreq(h) == before);
}

static void test_answers(struct mh_client *c, struct helper *h)
{
	struct mh_err e;
	uint64_t size = 0;

	CHECK(mh_client_connected(c));
	CHECK(mh_ping(c, &e) == 0 && e.kind == MH_E_OK);
	struct mh_msg last = helper_last(h);
	CHECK(helper_nreq(h) == 1 && last.type == MH_REQ_PING && last.id != 0);
	CHECK(mh_create(c, "pvc-1", 1 << 20, &size, &e) == 0 && size == (1 << 20) + 4096);
	CHECK(strcmp(helper_last(h).u.create.volume_id, "pvc-1") == 0);
	CHECK(mh_create(c, "full", 1, &size, &e) == -1 && e.kind == MH_E_NOSPACE &&
	      e.sys_errno == ENOSPC && strcmp(e.reason, "data directory full") == 0);
	CHECK(mh_delete(c, "pvc-1", &e) == 0);
	CHECK(mh_delete(c, "missing", &e) == -1 && e.kind == MH_E_NOTFOUND &&
	      e.sys_errno == ENOENT && strcmp(e.reason, "no such volume") == 0);

	struct mh_req_stage st = {.readonly = 1};
	strcpy(st.volume_id, "pvc-1");
	strcpy(st.staging_path, "/var/lib/kubelet/s");
	strcpy(st.fs_type, "ext4");
	strcpy(st.mount_flags, "noatime");
	CHECK(mh_stage(c, &st, &e) == 0);
	last = helper_last(h);
	/* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): both zeroed first */
	CHECK(last.type == MH_REQ_STAGE && memcmp(&last.u.stage, &st, sizeof(st)) == 0);
	CHECK(mh_unstage(c, "pvc-1", "/var/lib/kubelet/s", &e) == 0);
	CHECK(strcmp(helper_last(h).u.unstage.staging_path, "/var/lib/kubelet/s") == 0);
	struct mh_req_publish pb = {.readonly = 0};
	strcpy(pb.volume_id, "pvc-1");
	strcpy(pb.staging_path, "/var/lib/kubelet/s");
	strcpy(pb.target_path, "/var/lib/kubelet/t");
	CHECK(mh_publish(c, &pb, &e) == 0);
	last = helper_last(h);
	CHECK(last.type == MH_REQ_PUBLISH && memcmp(&last.u.publish, &pb, sizeof(pb)) == 0);
	CHECK(mh_unpublish(c, "pvc-1", "/var/lib/kubelet/t", &e) == 0);
	CHECK(strcmp(helper_last(h).u.unpublish.target_path, "/var/lib/kubelet/t") == 0);

	test_answers_v2(c, h);

	/* Refused locally: nothing reaches the helper. */
	int before = helper_nreq(h);
	char longid[MH_ID_MAX + 2];
	memset(longid, 'a', MH_ID_MAX + 1);
	longid[MH_ID_MAX + 1] = '\0';
	CHECK(mh_delete(c, longid, &e) == -1 && e.kind == MH_E_REFUSED &&
	      strstr(e.reason, "volume_id") != NULL);
	CHECK(mh_delete(c, NULL, &e) == -1 && e.kind == MH_E_REFUSED);
	longid[MH_ID_MAX] = '\0';
	CHECK(mh_delete(c, longid, &e) == 0); /* exactly at the bound is fine */
	before++;
	memset(st.fs_type, 'e', sizeof(st.fs_type)); /* not terminated within its array */
	CHECK(mh_stage(c, &st, &e) == -1 && e.kind == MH_E_REFUSED &&
	      strstr(e.reason, "fs_type") != NULL);
	strcpy(st.fs_type, "ext4");
	st.readonly = 2;
	CHECK(mh_stage(c, &st, &e) == -1 && e.kind == MH_E_REFUSED);
	CHECK(helper_nreq(h) == before);
	CHECK(mh_client_connected(c));
}

struct creator {
	struct mh_client *c;
	uint64_t size, got;
	int rc;
	int n; /* calls to make */
};

static void *creator_main(void *arg)
{
	struct creator *cr = arg;
	struct mh_err e;

	for (int i = 0; i < cr->n; i++) {
		cr->got = 0;
		cr->rc = mh_create(cr->c, "pvc-x", cr->size + (uint64_t)i, &cr->got, &e);
		if (cr->rc != 0 || cr->got != cr->size + (uint64_t)i + 4096)
			break;
	}
	return NULL;
}

/* Two calls from two threads; the helper answers the second one first. */
static void test_out_of_order(struct mh_client *c)
{
	struct creator a = {c, 1000, 0, -1, 1}, b = {c, 2000, 0, -1, 1};
	pthread_t ta, tb;

	pthread_create(&ta, NULL, creator_main, &a);
	pthread_create(&tb, NULL, creator_main, &b);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	CHECK(a.rc == 0 && a.got == 1000 + 4096);
	CHECK(b.rc == 0 && b.got == 2000 + 4096);
}

/* Many threads at once: every answer reaches its own caller. */
static void test_many_threads(struct mh_client *c)
{
	struct creator cr[8];
	pthread_t t[8];

	for (int i = 0; i < 8; i++) {
		cr[i] = (struct creator){c, (uint64_t)(i + 1) << 32, 0, -1, 300};
		pthread_create(&t[i], NULL, creator_main, &cr[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		CHECK(cr[i].rc == 0 && cr[i].got == cr[i].size + 299 + 4096);
	}
}

/* A helper that misbehaves: the call fails, the channel is broken, later calls fail at once. */
static void test_violation(struct mh_client *c, enum mode mode)
{
	struct helper *h = helper_start(mode);
	struct mh_err e;

	mh_client_set_fd(c, h->client_fd);
	CHECK(mh_client_connected(c));
	CHECK(unavailable(mh_delete(c, "pvc-1", &e), &e));
	CHECK(!mh_client_connected(c));
	CHECK(unavailable(mh_ping(c, &e), &e));
	CHECK(helper_nreq(h) == 1);
	helper_stop(h); /* the client shut the channel down, so the helper saw EOF */
}

struct waiting {
	struct mh_client *c;
	int rc;
	struct mh_err e;
	double done_at;
};

static void *ping_main(void *arg)
{
	struct waiting *w = arg;

	w->rc = mh_ping(w->c, &w->e);
	w->done_at = now();
	return NULL;
}

/* The helper goes away while a call waits: the call fails promptly. */
static void test_close_midcall(struct mh_client *c)
{
	struct helper *h = helper_start(H_CLOSE);
	struct mh_err e;

	mh_client_set_fd(c, h->client_fd);
	double t0 = now();
	CHECK(unavailable(mh_ping(c, &e), &e));
	CHECK(now() - t0 < 2.0);
	CHECK(!mh_client_connected(c));
	CHECK(unavailable(mh_ping(c, &e), &e));
	helper_stop(h);
}

/* Replacing the channel fails the call waiting on the old one; the new one works. */
static void test_replace_midcall(struct mh_client *c)
{
	struct helper *old = helper_start(H_HOLD), *fresh = helper_start(H_NORMAL);
	struct waiting w = {c, 0, {0}, 0};
	pthread_t t;
	struct mh_err e;

	mh_client_set_fd(c, old->client_fd);
	pthread_create(&t, NULL, ping_main, &w);
	helper_wait(old, 1);
	double t0 = now();
	mh_client_set_fd(c, fresh->client_fd);
	pthread_join(t, NULL);
	CHECK(unavailable(w.rc, &w.e) && w.done_at - t0 < 2.0);
	helper_stop(old);
	CHECK(mh_client_connected(c));
	CHECK(mh_ping(c, &e) == 0);
	CHECK(helper_nreq(fresh) == 1);
	mh_client_set_fd(c, -1);
	CHECK(!mh_client_connected(c));
	CHECK(unavailable(mh_ping(c, &e), &e));
	helper_stop(fresh);
}

/* Freeing the client while a call waits: the call fails, free returns. */
/*
 * A call the helper does not answer in time fails with MH_E_TIMEOUT; the late
 * answer, when it comes, is dropped (not a violation: the channel stays up).
 */
static void test_deadline(void)
{
	struct helper *h = helper_start(H_LATE);
	struct mh_client *c = mh_client_new(h->client_fd);
	struct mh_err e;
	mh_client_set_deadlines(c, 1, 1, 1);
	double t0 = now();
	CHECK(mh_ping(c, &e) == -1 && e.kind == MH_E_TIMEOUT);
	CHECK(now() - t0 >= 0.9);
	CHECK(mh_ping(c, &e) == 0); /* the late answer came first, and was dropped */
	CHECK(mh_client_connected(c));
	CHECK(mh_ping(c, &e) == 0);
	mh_client_free(c);
	helper_stop(h);
}

static void test_free_midcall(void)
{
	struct helper *h = helper_start(H_HOLD);
	struct mh_client *c = mh_client_new(h->client_fd);
	struct waiting w = {c, 0, {0}, 0};
	pthread_t t;

	pthread_create(&t, NULL, ping_main, &w);
	helper_wait(h, 1);
	mh_client_free(c);
	pthread_join(t, NULL);
	CHECK(unavailable(w.rc, &w.e));
	helper_stop(h);
}

int main(void)
{
	struct helper *h;
	struct mh_client *c;

	log_init("test_mh_client", LOG_FMT_TEXT, LOG_LVL_DEBUG);
	alarm(5);
	test_no_channel();

	h = helper_start(H_NORMAL);
	c = mh_client_new(h->client_fd);
	test_answers(c, h);
	test_many_threads(c);
	mh_client_set_fd(c, -1);
	helper_stop(h);

	h = helper_start(H_REVERSE2);
	mh_client_set_fd(c, h->client_fd);
	test_out_of_order(c);
	mh_client_set_fd(c, -1);
	helper_stop(h);

	alarm(5);
	enum mode bad[] = {H_WRONG_ID, H_WRONG_TYPE, H_REQUEST, H_GARBAGE, H_OVERSIZE};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		test_violation(c, bad[i]);

	alarm(5);
	test_close_midcall(c);

	/* A fresh channel after the helper died: calls work again. */
	h = helper_start(H_NORMAL);
	mh_client_set_fd(c, h->client_fd);
	struct mh_err e;
	CHECK(mh_client_connected(c));
	CHECK(mh_ping(c, &e) == 0);
	CHECK(mh_delete(c, "pvc-2", &e) == 0);

	alarm(5);
	test_replace_midcall(c);
	mh_client_free(c);
	helper_stop(h);

	alarm(5);
	test_deadline();
	alarm(5);
	test_free_midcall();
	alarm(0);
	return tap_done("test_mh_client");
}
