/*
 * CSI calls over gRPC C core: unary, and server-streaming (the SnapshotMetadata
 * service). Runs in the client tools (sepcsictl, sepcsi-bench), with the
 * operator's privilege; nothing here is privileged.
 *
 * Each connection owns one channel and one pluck completion queue. A unary
 * call is one batch: send metadata, the packed request and the half-close;
 * receive metadata, the answer and the status. A streaming call sends the
 * same way, then receives one answer per batch, each handed on and freed
 * before the next is asked for (so memory is one answer, however long the
 * stream), then the status. Every batch is plucked by its own tag and waited
 * for before the next starts, so the queue never holds anything else and
 * closing the connection only has to shut the queue down. Nothing here is
 * fatal except allocation failure.
 */
#include "csic.h"
#include "grpc_codes.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CSIC_DEFAULT_ENDPOINT "unix:///run/sepcsi/csi.sock"

struct csic_conn {
	grpc_channel *ch;
	grpc_completion_queue *cq;
	char *target;
};

const char *csic_code_name(int code)
{
	static _Thread_local char buf[24];

	const char *n = grpc_code_name(code);
	if (n)
		return n;
	snprintf(buf, sizeof(buf), "CODE_%d", code);
	return buf;
}

const char *csic_default_endpoint(void)
{
	const char *e = getenv("CSI_ENDPOINT");

	return e && *e ? e : CSIC_DEFAULT_ENDPOINT;
}

void csic_global_init(void)
{
	grpc_init();
}

void csic_global_shutdown(void)
{
	grpc_shutdown();
}

int64_t csic_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		abort();
	return p;
}

struct csic_conn *csic_open(const char *endpoint)
{
	struct csic_conn *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
	if (endpoint[0] == '/') {
		size_t n = strlen(endpoint) + sizeof("unix://");
		c->target = malloc(n);
		if (!c->target)
			abort();
		snprintf(c->target, n, "unix://%s", endpoint);
	} else {
		c->target = xstrdup(endpoint);
	}
	/* A CLI call should fail fast, not wait for a socket that may never appear. */
	grpc_arg args[1] = {
	    {.type = GRPC_ARG_INTEGER, .key = (char *)GRPC_ARG_ENABLE_RETRIES, .value.integer = 0}};
	grpc_channel_args cargs = {.num_args = 1, .args = args};
	grpc_channel_credentials *creds = grpc_insecure_credentials_create();
	c->ch = grpc_channel_create(c->target, creds, &cargs);
	grpc_channel_credentials_release(creds);
	c->cq = grpc_completion_queue_create_for_pluck(NULL);
	return c;
}

const char *csic_target(const struct csic_conn *c)
{
	return c->target;
}

void csic_close(struct csic_conn *c)
{
	if (!c)
		return;
	grpc_completion_queue_shutdown(c->cq);
	while (grpc_completion_queue_pluck(c->cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
	           .type != GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(c->cq);
	grpc_channel_destroy(c->ch);
	free(c->target);
	free(c);
}

__attribute__((format(printf, 3, 4))) static int set_status(struct csic_status *st, int code,
                                                            const char *fmt, ...)
{
	va_list ap;

	st->code = code;
	va_start(ap, fmt);
	vsnprintf(st->message, sizeof(st->message), fmt, ap);
	va_end(ap);
	return code;
}

/* A new call to method on c's queue, with its deadline; NULL if gRPC will not make one. */
static grpc_call *new_call(struct csic_conn *c, const char *method, int64_t timeout_ms)
{
	gpr_timespec deadline = gpr_inf_future(GPR_CLOCK_MONOTONIC);

	if (timeout_ms > 0)
		deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
		                        gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
	grpc_slice mslice = grpc_slice_from_copied_string(method);
	grpc_call *call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
	                                           mslice, NULL, deadline, NULL);
	grpc_slice_unref(mslice);
	return call;
}

/* req packed into a new byte buffer, which the caller destroys. */
static grpc_byte_buffer *pack(const ProtobufCMessage *req)
{
	size_t n = protobuf_c_message_get_packed_size(req);
	uint8_t *buf = malloc(n ? n : 1);

	if (!buf)
		abort();
	protobuf_c_message_pack(req, buf);
	grpc_slice out = grpc_slice_new(buf, n, free);
	grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&out, 1);
	grpc_slice_unref(out);
	return bb;
}

enum { BATCH_NOT_STARTED = -1, BATCH_NOT_DONE = -2 };

/*
 * Runs the n ops as one batch and waits for it, plucked by its own tag.
 * Returns 0, with *ok telling whether every op succeeded (a receive that
 * fails means the call is over: its status says why); BATCH_NOT_STARTED or
 * BATCH_NOT_DONE otherwise, which batch_failed() words.
 */
static int run_batch(struct csic_conn *c, grpc_call *call, const grpc_op *ops, size_t n, bool *ok)
{
	int tag = 0;

	*ok = false;
	if (grpc_call_start_batch(call, ops, n, &tag, NULL) != GRPC_CALL_OK)
		return BATCH_NOT_STARTED;
	grpc_event ev =
	    grpc_completion_queue_pluck(c->cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	if (ev.type != GRPC_OP_COMPLETE)
		return BATCH_NOT_DONE;
	*ok = ev.success != 0;
	return 0;
}

static int batch_failed(struct csic_status *st, int rc, const char *method)
{
	if (rc == BATCH_NOT_STARTED)
		return set_status(st, CSIC_INTERNAL, "cannot start a call to %s", method);
	return set_status(st, CSIC_INTERNAL, "the call to %s did not complete", method);
}

/* The status the call ended with into *st (its message cut to fit); returns its code. */
static int copy_status(struct csic_status *st, grpc_status_code status, grpc_slice details)
{
	size_t dlen = GRPC_SLICE_LENGTH(details);

	if (dlen >= sizeof(st->message))
		dlen = sizeof(st->message) - 1;
	st->code = (int)status;
	memcpy(st->message, GRPC_SLICE_START_PTR(details), dlen);
	st->message[dlen] = '\0';
	return st->code;
}

/* Decode one answer; INTERNAL when there is none or it does not parse. */
static int decode(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *resp_desc,
                  ProtobufCMessage **resp, struct csic_status *st)
{
	grpc_byte_buffer_reader rd;

	if (!bb)
		return set_status(st, CSIC_INTERNAL, "%s", "the server sent OK without an answer");
	if (!grpc_byte_buffer_reader_init(&rd, bb))
		return set_status(st, CSIC_INTERNAL, "%s", "unreadable answer");
	grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
	grpc_byte_buffer_reader_destroy(&rd);
	*resp = protobuf_c_message_unpack(resp_desc, NULL, GRPC_SLICE_LENGTH(all),
	                                  GRPC_SLICE_START_PTR(all));
	grpc_slice_unref(all);
	if (!*resp)
		return set_status(st, CSIC_INTERNAL, "the answer could not be decoded as %s",
		                  resp_desc->name);
	return CSIC_OK;
}

int csic_call(struct csic_conn *c, const char *method, const ProtobufCMessage *req,
              const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
              int64_t timeout_ms, struct csic_status *st)
{
	*resp = NULL;
	st->code = CSIC_OK;
	st->message[0] = '\0';

	grpc_call *call = new_call(c, method, timeout_ms);
	if (!call)
		return set_status(st, CSIC_INTERNAL, "cannot create a call to %s", method);
	grpc_byte_buffer *req_bb = pack(req);
	grpc_metadata_array md_initial, md_trailing;
	grpc_metadata_array_init(&md_initial);
	grpc_metadata_array_init(&md_trailing);
	grpc_byte_buffer *resp_bb = NULL;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	const char *error_string = NULL;

	grpc_op ops[6];
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = req_bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &md_initial;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &resp_bb;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &md_trailing;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	ops[5].data.recv_status_on_client.error_string = &error_string;

	bool ok;
	int code, rc = run_batch(c, call, ops, 6, &ok);
	if (rc != 0) {
		code = batch_failed(st, rc, method);
		goto out;
	}
	code = copy_status(st, status, details);
	if (code == CSIC_OK)
		code = decode(resp_bb, resp_desc, resp, st);
out:
	gpr_free((void *)error_string);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md_initial);
	grpc_metadata_array_destroy(&md_trailing);
	grpc_byte_buffer_destroy(req_bb);
	if (resp_bb)
		grpc_byte_buffer_destroy(resp_bb);
	grpc_call_unref(call);
	return code;
}

/*
 * Receives the answers of a stream one at a time, each decoded, handed to
 * each and freed before the next is asked for. Returns CSIC_OK at the end of
 * the stream (the status then says how the server ended it), or our own
 * failure: INTERNAL (an answer that does not decode, a batch that does not
 * complete) or CANCELLED (each said stop), with *st filled.
 */
static int receive_each(struct csic_conn *c, grpc_call *call,
                        const ProtobufCMessageDescriptor *resp_desc,
                        int (*each)(const ProtobufCMessage *msg, void *arg), void *arg,
                        const char *method, struct csic_status *st)
{
	for (unsigned long n = 1;; n++) {
		grpc_byte_buffer *bb = NULL;
		grpc_op op;
		bool ok;
		memset(&op, 0, sizeof(op));
		op.op = GRPC_OP_RECV_MESSAGE;
		op.data.recv_message.recv_message = &bb;
		int rc = run_batch(c, call, &op, 1, &ok);
		if (rc != 0)
			return batch_failed(st, rc, method);
		if (!ok || !bb)
			return CSIC_OK; /* the stream is over; the status says how */
		ProtobufCMessage *msg = NULL;
		int code = decode(bb, resp_desc, &msg, st);
		grpc_byte_buffer_destroy(bb);
		if (code != CSIC_OK)
			return set_status(st, code, "answer %lu could not be decoded as %s", n,
			                  resp_desc->name);
		int stop = each(msg, arg);
		protobuf_c_message_free_unpacked(msg, NULL);
		if (stop)
			return set_status(st, CSIC_CANCELLED,
			                  "the caller stopped %s after %lu answer(s)", method, n);
	}
}

int csic_call_stream(struct csic_conn *c, const char *method, const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc,
                     int (*each)(const ProtobufCMessage *msg, void *arg), void *arg,
                     int64_t timeout_ms, struct csic_status *st)
{
	st->code = CSIC_OK;
	st->message[0] = '\0';

	grpc_call *call = new_call(c, method, timeout_ms);
	if (!call)
		return set_status(st, CSIC_INTERNAL, "cannot create a call to %s", method);
	grpc_byte_buffer *req_bb = pack(req);
	grpc_metadata_array md_initial, md_trailing;
	grpc_metadata_array_init(&md_initial);
	grpc_metadata_array_init(&md_trailing);
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	const char *error_string = NULL;

	/* The request, whole, then the answers one batch each, then the status. */
	grpc_op ops[4];
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = req_bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &md_initial;

	bool ok;
	int code, rc = run_batch(c, call, ops, 4, &ok);
	if (rc != 0) {
		code = batch_failed(st, rc, method);
		goto out;
	}
	/* A batch that failed means the call is over: straight to its status. */
	code = ok ? receive_each(c, call, resp_desc, each, arg, method, st) : CSIC_OK;
	if (code != CSIC_OK)
		grpc_call_cancel(call, NULL); /* our failure, not the server's: keep its reason */

	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[0].data.recv_status_on_client.trailing_metadata = &md_trailing;
	ops[0].data.recv_status_on_client.status = &status;
	ops[0].data.recv_status_on_client.status_details = &details;
	ops[0].data.recv_status_on_client.error_string = &error_string;
	rc = run_batch(c, call, ops, 1, &ok);
	if (rc != 0) {
		if (code == CSIC_OK)
			code = batch_failed(st, rc, method);
		goto out;
	}
	if (code == CSIC_OK)
		code = copy_status(st, status, details);
out:
	gpr_free((void *)error_string);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md_initial);
	grpc_metadata_array_destroy(&md_trailing);
	grpc_byte_buffer_destroy(req_bb);
	grpc_call_unref(call);
	return code;
}
