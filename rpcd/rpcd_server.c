/*
 * The gRPC C core server for CSI. Runs in rpcd, unprivileged.
 *
 * One completion queue is shared by all worker threads, so a slow call on one
 * thread never holds up events for the others. Every CSI method the --mode
 * serves is registered with the server, which reads a call's request message
 * before it reports the call: such a call moves NEW (request bytes included)
 * -> SEND (the answer, its status and the close) and is freed when the SEND
 * batch completes. REQUESTS_PER_METHOD requests for each are kept
 * outstanding, each re-armed as soon as its call arrives (more calls of one
 * method wait in the server until then). Any other method reaches a generic
 * request, one per worker, kept outstanding the same way: NEW -> RECV (its
 * bytes) -> SEND, answered UNIMPLEMENTED. Requests are decoded with
 * protobuf-c against the method's type; undecodable bytes are
 * INVALID_ARGUMENT. Each call logs one line.
 *
 * A server-streaming method (the SnapshotMetadata service) whose start
 * succeeds moves NEW -> STREAM (one message in flight at a time: the next is
 * made only when the last one's batch completes, so a slow reader holds one
 * message) -> SEND (the status). Its messages are made by STREAMERS threads
 * of their own, never by the workers, from a queue in arrival order: making
 * one waits for the helper to read a page of snapshots, and a page with no
 * range puts the stream back at the end of the queue, so streams take turns
 * and Probe or a Node call never waits behind a long read. Its
 * RECV_CLOSE_ON_SERVER is a batch of its own, started with the stream, whose
 * tag is the call's address plus one (calls are allocated, so their addresses
 * are even); it completes when the client closes or cancels, and a stream
 * whose client has gone ends with CANCELLED at its next turn. Such a call
 * counts its batches in flight and its place in the queue, and is freed when
 * the last of them is done.
 *
 * Stopping: shutdown_and_notify admits no new calls and completes its tag when
 * the calls in flight are done; only then is the queue shut down and drained.
 * Failures to start (bind) are fatal to the process.
 */
#include "rpcd.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "rpcd_metrics.h"
#include "store.h"

#define STOP_GRACE_SECONDS 30
/* Outstanding requests for each registered method. */
#define REQUESTS_PER_METHOD 2
/* Threads making streams' messages: as many as the helper reads pages at once. */
#define STREAMERS 4

enum call_state { CALL_NEW, CALL_RECV, CALL_STREAM, CALL_SEND };

struct call {
	enum call_state state;
	const struct rpcd_method *m; /* a registered method's call; NULL: a generic one */
	grpc_call *call;
	grpc_call_details details; /* a generic call's method */
	gpr_timespec deadline;     /* a registered call's (the server enforces it) */
	grpc_metadata_array md;
	grpc_byte_buffer *req_bb, *resp_bb;
	grpc_slice status_msg;
	int cancelled;
	struct timespec start;
	/* A streaming call's, from its start to its status. */
	struct ctl_stream *stream;
	atomic_int pending;   /* its batches in flight, and the worker setting it up */
	atomic_bool closed;   /* its RECV_CLOSE_ON_SERVER batch completed */
	bool sent_metadata;   /* its initial metadata went with the first message */
	struct ctl_status st; /* how it ends */
	struct rpcd_server *srv;
	struct call *queued_next; /* in the streamers' queue */
};

struct rpcd_server {
	struct rpcd *r;
	grpc_server *server;
	grpc_completion_queue *cq;
	void *registered[RPCD_METHODS_MAX]; /* by method index; NULL: not served */
	pthread_t *workers;
	int nworkers;
	int shutdown_tag; /* address used as the tag */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool shutdown_done;
	/* Streams waiting for their next message, and the threads that make them. */
	pthread_t streamers[STREAMERS];
	pthread_mutex_t qmu;
	pthread_cond_t qcv;
	struct call *qhead, *qtail;
	bool qstop;
};

static struct call *call_new(void)
{
	struct call *c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	c->state = CALL_NEW;
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->md);
	return c;
}

/* A generic request: a method that is not registered. */
static void request_call(struct rpcd_server *s)
{
	struct call *c = call_new();
	grpc_call_error err =
	    grpc_server_request_call(s->server, &c->call, &c->details, &c->md, s->cq, s->cq, c);
	if (err != GRPC_CALL_OK)
		log_fatal("grpc_server_request_call failed: %d", err);
}

/* A request for the registered method m, whose call comes with its request message. */
static void request_method(struct rpcd_server *s, const struct rpcd_method *m)
{
	struct call *c = call_new();
	c->m = m;
	grpc_call_error err = grpc_server_request_registered_call(
	    s->server, s->registered[rpcd_method_index(m)], &c->call, &c->deadline, &c->md,
	    &c->req_bb, s->cq, s->cq, c);
	if (err != GRPC_CALL_OK)
		log_fatal("grpc_server_request_registered_call failed: %d", err);
}

static void call_free(struct call *c)
{
	if (c->call)
		grpc_call_unref(c->call);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->md);
	if (c->req_bb)
		grpc_byte_buffer_destroy(c->req_bb);
	if (c->resp_bb)
		grpc_byte_buffer_destroy(c->resp_bb);
	if (c->state == CALL_SEND)
		grpc_slice_unref(c->status_msg);
	free(c);
}

static double elapsed_ms(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* The volume a request is about, for the log line: volume_id, or name for CreateVolume. */
static const char *request_subject(const ProtobufCMessage *msg)
{
	static const char *const keys[] = {"volume_id", "name", "snapshot_id",
	                                   "target_snapshot_id"};
	if (!msg)
		return NULL;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const ProtobufCFieldDescriptor *f =
		    protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, keys[i]);
		if (f && f->type == PROTOBUF_C_TYPE_STRING &&
		    f->label != PROTOBUF_C_LABEL_REPEATED) {
			const char *v = *(const char *const *)((const char *)msg + f->offset);
			if (v && *v)
				return v;
		}
	}
	return NULL;
}

/* A response message as the byte buffer a SEND_MESSAGE takes. */
static grpc_byte_buffer *pack(const void *resp)
{
	size_t n = protobuf_c_message_get_packed_size(resp);
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		abort();
	protobuf_c_message_pack(resp, buf);
	grpc_slice out = grpc_slice_new(buf, n, free);
	grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&out, 1);
	grpc_slice_unref(out);
	return bb;
}

/* Decode, dispatch, encode. Fills c->resp_bb on success; returns the status. */
static void dispatch(struct rpcd_server *s, struct call *c, struct ctl_status *st,
                     const struct rpcd_method **mp, const char **subject, ProtobufCMessage **reqp)
{
	const char *path = (const char *)GRPC_SLICE_START_PTR(c->details.method);
	size_t plen = GRPC_SLICE_LENGTH(c->details.method);
	const struct rpcd_method *m = *mp = c->m ? c->m : rpcd_method_find(path, plen);

	if (!m) {
		ctl_fail(st, CTL_UNIMPLEMENTED, "unknown method %.*s",
		         (int)(plen > 200 ? 200 : plen), path);
		return;
	}
	if (!rpcd_method_enabled(s->r, m)) {
		ctl_fail(st, CTL_UNIMPLEMENTED, "%s is not served in this --mode",
		         strrchr(m->path, '/') + 1);
		return;
	}
	if (!c->req_bb) {
		ctl_fail(st, CTL_INVALID_ARGUMENT, "missing request message");
		return;
	}
	grpc_byte_buffer_reader rd;
	if (!grpc_byte_buffer_reader_init(&rd, c->req_bb)) {
		ctl_fail(st, CTL_INVALID_ARGUMENT, "unreadable request message");
		return;
	}
	grpc_slice in = grpc_byte_buffer_reader_readall(&rd);
	grpc_byte_buffer_reader_destroy(&rd);
	ProtobufCMessage *req = protobuf_c_message_unpack(m->req, NULL, GRPC_SLICE_LENGTH(in),
	                                                  GRPC_SLICE_START_PTR(in));
	grpc_slice_unref(in);
	if (!req) {
		ctl_fail(st, CTL_INVALID_ARGUMENT, "request could not be decoded as %s",
		         m->req->name);
		return;
	}
	*reqp = req;
	*subject = request_subject(req);

	struct ctl_arena *a = ctl_arena_new();
	void *resp = NULL;
	st->code = CTL_OK;
	st->msg[0] = '\0';
	if (m->stream_fn) { /* its messages come later: stream_step */
		m->stream_fn(s->r->ctl, req, &c->stream, st);
		ctl_arena_free(a);
		return;
	}
	if (m->ctl_fn)
		m->ctl_fn(s->r->ctl, req, &resp, a, st);
	else
		m->rpcd_fn(s->r, req, &resp, a, st);
	if (st->code == CTL_OK) {
		if (!resp)
			ctl_fail(st, CTL_INTERNAL, "handler returned no response");
		else
			c->resp_bb = pack(resp);
	}
	ctl_arena_free(a);
}

/* The call's one log line and its metrics, once its status is known. */
static void log_call(const struct call *c, const struct rpcd_method *m, const char *subject,
                     const struct ctl_status *st)
{
	const char *method = m ? strrchr(m->path, '/') + 1 : "?";
	double took = elapsed_ms(&c->start);
	char ms[32];
	rpcd_metrics_call(m, st->code, took / 1e3);
	snprintf(ms, sizeof(ms), "%.3f", took);
	log_kv(st->code == CTL_OK || st->code == CTL_NOT_FOUND ? LOG_LVL_INFO : LOG_LVL_WARN,
	       "csi_call", "method", method, "volume", subject, "duration_ms", ms, "code",
	       ctl_code_name(st->code), "message", st->code ? st->msg : NULL, NULL);
}

static void start_batch(struct call *c, const grpc_op *ops, size_t n, void *tag)
{
	if (grpc_call_start_batch(c->call, ops, n, tag, NULL) != GRPC_CALL_OK)
		log_fatal("grpc_call_start_batch failed");
}

/* A streaming call's reference dropped: the last frees it. */
static void stream_release(struct call *c)
{
	if (atomic_fetch_sub(&c->pending, 1) != 1)
		return;
	ctl_stream_free(c->stream);
	call_free(c);
}

/* Queue the stream for its next step; the caller's reference goes with it. */
static void stream_queue(struct call *c)
{
	struct rpcd_server *s = c->srv;
	pthread_mutex_lock(&s->qmu);
	c->queued_next = NULL;
	if (s->qtail)
		s->qtail->queued_next = c;
	else
		s->qhead = c;
	s->qtail = c;
	pthread_cond_signal(&s->qcv);
	pthread_mutex_unlock(&s->qmu);
}

/*
 * The stream's next batch: its next message, or its status once it has
 * ended, failed or lost its client. False when it has none yet (a page held
 * no range): it is queued again, its reference with it.
 */
static bool stream_step(struct call *c)
{
	grpc_op ops[2];
	size_t n = 0;
	void *resp = NULL;
	struct ctl_arena *a = ctl_arena_new();
	int more = -1;
	memset(ops, 0, sizeof(ops));
	if (c->st.code == CTL_OK && atomic_load(&c->closed))
		ctl_fail(&c->st, CTL_CANCELLED, "the client went away");
	if (c->st.code == CTL_OK)
		more = ctl_stream_next(c->stream, &resp, a, &c->st);
	if (more == 2) {
		ctl_arena_free(a);
		stream_queue(c);
		return false;
	}
	if (!c->sent_metadata) {
		ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
		c->sent_metadata = true;
	}
	if (more == 1) {
		c->resp_bb = pack(resp);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = c->resp_bb;
		c->state = CALL_STREAM;
	} else {
		log_call(c, c->m, NULL, &c->st);
		c->status_msg =
		    grpc_slice_from_copied_string(c->st.code == CTL_OK ? "" : c->st.msg);
		ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
		ops[n].data.send_status_from_server.status = (grpc_status_code)c->st.code;
		ops[n++].data.send_status_from_server.status_details = &c->status_msg;
		c->state = CALL_SEND;
	}
	ctl_arena_free(a);
	atomic_fetch_add(&c->pending, 1);
	start_batch(c, ops, n, c);
	return true;
}

/* A streamer: the queue's streams, one step each, until the server stops. */
static void *streamer(void *arg)
{
	struct rpcd_server *s = arg;
	for (;;) {
		pthread_mutex_lock(&s->qmu);
		while (!s->qhead && !s->qstop)
			pthread_cond_wait(&s->qcv, &s->qmu);
		struct call *c = s->qhead;
		if (c) {
			s->qhead = c->queued_next;
			if (!s->qhead)
				s->qtail = NULL;
		}
		pthread_mutex_unlock(&s->qmu);
		if (!c)
			return NULL;
		if (stream_step(c))
			stream_release(c); /* the queue's reference */
	}
}

/* A stream's message went (or the call broke): its next step, in the queue. */
static void on_stream_sent(struct call *c, bool success)
{
	grpc_byte_buffer_destroy(c->resp_bb);
	c->resp_bb = NULL;
	if (!success && c->st.code == CTL_OK)
		ctl_fail(&c->st, CTL_CANCELLED, "the stream broke");
	stream_queue(c); /* the batch's reference, now the queue's */
}

/* A stream starts: its close batch (tag c + 1), then its first step, in the queue. */
static void stream_start(struct rpcd_server *s, struct call *c)
{
	grpc_op op;
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	op.data.recv_close_on_server.cancelled = &c->cancelled;
	c->st.code = CTL_OK;
	c->srv = s;
	atomic_store(&c->pending, 2); /* the close batch, and the queue */
	start_batch(c, &op, 1, (char *)c + 1);
	stream_queue(c);
}

static void on_received(struct rpcd_server *s, struct call *c)
{
	struct ctl_status st = {.code = CTL_OK};
	const struct rpcd_method *m = NULL;
	const char *subject = NULL;
	ProtobufCMessage *req = NULL;

	dispatch(s, c, &st, &m, &subject, &req);
	store_wait_read(s->r->st); /* what the call read is durable before it goes out */
	if (c->stream) {
		if (req)
			protobuf_c_message_free_unpacked(req, NULL);
		c->m = m;
		stream_start(s, c);
		return;
	}
	log_call(c, m, subject, &st);
	if (req)
		protobuf_c_message_free_unpacked(req, NULL);

	grpc_op ops[4];
	memset(ops, 0, sizeof(ops));
	size_t n = 0;
	ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (st.code == CTL_OK) {
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = c->resp_bb;
	}
	c->status_msg = grpc_slice_from_copied_string(st.code == CTL_OK ? "" : st.msg);
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = (grpc_status_code)st.code;
	ops[n++].data.send_status_from_server.status_details = &c->status_msg;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
	c->state = CALL_SEND;
	if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK)
		log_fatal("grpc_call_start_batch (send) failed");
}

static void on_new_call(struct rpcd_server *s, struct call *c)
{
	clock_gettime(CLOCK_MONOTONIC, &c->start);
	if (c->m) {
		request_method(s, c->m); /* keep its requests outstanding */
		on_received(s, c);       /* its request message came with it */
		return;
	}
	request_call(s); /* keep one request outstanding per worker */
	grpc_op op;
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &c->req_bb;
	c->state = CALL_RECV;
	if (grpc_call_start_batch(c->call, &op, 1, c, NULL) != GRPC_CALL_OK)
		log_fatal("grpc_call_start_batch (recv) failed");
}

static void *worker(void *arg)
{
	struct rpcd_server *s = arg;
	for (;;) {
		grpc_event ev =
		    grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		if (ev.tag == &s->shutdown_tag) {
			pthread_mutex_lock(&s->mu);
			s->shutdown_done = true;
			pthread_cond_broadcast(&s->cv);
			pthread_mutex_unlock(&s->mu);
			continue;
		}
		if ((uintptr_t)ev.tag & 1) { /* a stream's close batch: the client closed or left */
			struct call *c = (struct call *)((char *)ev.tag - 1);
			atomic_store(&c->closed, true);
			stream_release(c);
			continue;
		}
		struct call *c = ev.tag;
		switch (c->state) {
		case CALL_NEW:
			if (ev.success)
				on_new_call(s, c);
			else
				call_free(c); /* the server is shutting down */
			break;
		case CALL_RECV:
			on_received(s, c); /* a failed receive still gets a status */
			break;
		case CALL_STREAM:
			on_stream_sent(c, ev.success);
			break;
		case CALL_SEND:
			if (c->stream)
				stream_release(c);
			else
				call_free(c);
			break;
		}
	}
	return NULL;
}

struct rpcd_server *rpcd_server_start(struct rpcd *r, int nworkers)
{
	struct rpcd_server *s = calloc(1, sizeof(*s));
	if (!s)
		abort();
	s->r = r;
	s->nworkers = nworkers;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	pthread_mutex_init(&s->qmu, NULL);
	pthread_cond_init(&s->qcv, NULL);
	for (int i = 0; i < STREAMERS; i++)
		if (pthread_create(&s->streamers[i], NULL, streamer, s) != 0)
			log_fatal("cannot start streamer thread");

	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->server = grpc_server_create(NULL, NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);
	for (size_t i = 0; i < rpcd_method_count(); i++) {
		const struct rpcd_method *m = rpcd_method_at(i);
		if (!rpcd_method_enabled(r, m))
			continue;
		s->registered[i] = grpc_server_register_method(
		    s->server, m->path, NULL, GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
		if (!s->registered[i])
			log_fatal("cannot register method %s", m->path);
	}
	grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
	int port = grpc_server_add_http2_port(s->server, r->endpoint, creds);
	grpc_server_credentials_release(creds);
	if (port == 0)
		log_fatal("cannot listen on %s", r->endpoint);
	grpc_server_start(s->server);

	s->workers = calloc((size_t)nworkers, sizeof(*s->workers));
	if (!s->workers)
		abort();
	for (size_t i = 0; i < rpcd_method_count(); i++)
		for (int k = 0; s->registered[i] && k < REQUESTS_PER_METHOD; k++)
			request_method(s, rpcd_method_at(i));
	for (int i = 0; i < nworkers; i++) {
		request_call(s);
		if (pthread_create(&s->workers[i], NULL, worker, s) != 0)
			log_fatal("cannot start worker thread");
	}
	return s;
}

void rpcd_server_stop_and_free(struct rpcd_server *s)
{
	grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);

	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += STOP_GRACE_SECONDS;
	pthread_mutex_lock(&s->mu);
	while (!s->shutdown_done) {
		if (pthread_cond_timedwait(&s->cv, &s->mu, &deadline) != 0 && !s->shutdown_done) {
			log_warn("calls still in flight after %d s; cancelling them",
			         STOP_GRACE_SECONDS);
			grpc_server_cancel_all_calls(s->server);
			deadline.tv_sec += 3600;
		}
	}
	pthread_mutex_unlock(&s->mu);

	/* Every call is done: no stream is left to make a message for. */
	pthread_mutex_lock(&s->qmu);
	s->qstop = true;
	pthread_cond_broadcast(&s->qcv);
	pthread_mutex_unlock(&s->qmu);
	for (int i = 0; i < STREAMERS; i++)
		pthread_join(s->streamers[i], NULL);
	grpc_completion_queue_shutdown(s->cq);
	for (int i = 0; i < s->nworkers; i++)
		pthread_join(s->workers[i], NULL);
	grpc_server_destroy(s->server);
	grpc_completion_queue_destroy(s->cq);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->qmu);
	pthread_cond_destroy(&s->qcv);
	free(s->workers);
	free(s);
}
