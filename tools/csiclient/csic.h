/*
 * csiclient: the small CSI client library that sepcsictl and sepcsi-bench
 * share. Unary and server-streaming gRPC calls over gRPC C core with
 * protobuf-c messages, the names of the gRPC status codes, and the human
 * units both tools accept (sizes such as 1Gi, durations such as 30s).
 *
 * Runs in the operator's process, with whatever privilege the operator has;
 * nothing here is privileged. It knows nothing about sepcsi: any CSI endpoint
 * that speaks gRPC will do.
 *
 * Errors: functions return 0 or -1 (parsers), or the gRPC status code of the
 * call (csic_call, csic_call_stream). Allocation failure aborts.
 */
#ifndef SEPCSI_CSIC_H
#define SEPCSI_CSIC_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "units.h"

/* gRPC status codes as numbered on the wire (the same numbers as grpc_status_code). */
enum csic_code {
	CSIC_OK = 0,
	CSIC_CANCELLED = 1,
	CSIC_UNKNOWN = 2,
	CSIC_INVALID_ARGUMENT = 3,
	CSIC_DEADLINE_EXCEEDED = 4,
	CSIC_NOT_FOUND = 5,
	CSIC_ALREADY_EXISTS = 6,
	CSIC_PERMISSION_DENIED = 7,
	CSIC_RESOURCE_EXHAUSTED = 8,
	CSIC_FAILED_PRECONDITION = 9,
	CSIC_ABORTED = 10,
	CSIC_OUT_OF_RANGE = 11,
	CSIC_UNIMPLEMENTED = 12,
	CSIC_INTERNAL = 13,
	CSIC_UNAVAILABLE = 14,
	CSIC_DATA_LOSS = 15,
	CSIC_UNAUTHENTICATED = 16,
};
#define CSIC_NCODES 17

/* The outcome of one call: its code and the server's (or gRPC's) message. */
struct csic_status {
	int code;
	char message[1024];
};

/* The default CSI endpoint: $CSI_ENDPOINT, else unix:///run/sepcsi/csi.sock. */
const char *csic_default_endpoint(void);

/* grpc_init / grpc_shutdown, once per process around every other call. */
void csic_global_init(void);
void csic_global_shutdown(void);

/*
 * One channel to a CSI endpoint ("unix:///path", "unix:path", or an absolute
 * path, which is taken as a unix socket) and its completion queue. Creating it
 * does not connect: the first call does, and fails with UNAVAILABLE if nobody
 * listens. A connection serves one call at a time: give each thread its own.
 * csic_close accepts NULL.
 */
struct csic_conn;
struct csic_conn *csic_open(const char *endpoint);
void csic_close(struct csic_conn *c);
/* The gRPC target the connection was opened with (owned by the connection). */
const char *csic_target(const struct csic_conn *c);

/*
 * A unary call to method ("/csi.v1.Controller/CreateVolume") with the request
 * req, waiting at most timeout_ms (<= 0: no deadline). Returns the status code
 * and fills *st. On OK, *resp is the decoded answer of type resp_desc, which
 * the caller frees with protobuf_c_message_free_unpacked(*resp, NULL); on any
 * other code *resp is NULL. An answer that cannot be decoded is INTERNAL.
 */
int csic_call(struct csic_conn *c, const char *method, const ProtobufCMessage *req,
              const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
              int64_t timeout_ms, struct csic_status *st);

/*
 * A server-streaming call ("/csi.v1.SnapshotMetadata/GetMetadataAllocated"):
 * sends req, then hands each answer, decoded as resp_desc, to each(msg, arg)
 * as it arrives. msg is the caller's only during that call: it is freed when
 * each returns, before the next answer is received, so memory stays one
 * answer however long the stream. timeout_ms bounds the whole stream (<= 0:
 * no deadline). Returns the status code the stream ended with and fills *st;
 * the answers handed over before a failure were handed over all the same.
 * If each returns nonzero, the call is cancelled and the result is CANCELLED
 * ("the caller stopped ..."); an answer that cannot be decoded cancels it
 * too and is INTERNAL. Like csic_call, one call at a time per connection.
 */
int csic_call_stream(struct csic_conn *c, const char *method, const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc,
                     int (*each)(const ProtobufCMessage *msg, void *arg), void *arg,
                     int64_t timeout_ms, struct csic_status *st);

/* "NOT_FOUND" for 5; "CODE_<n>" (static per-thread buffer) outside 0..16. */
const char *csic_code_name(int code);

/* Sizes and durations: units_parse_size() and friends, common/units.h. */

/* Monotonic clock in nanoseconds, for timing calls. */
int64_t csic_now_ns(void);

#endif
