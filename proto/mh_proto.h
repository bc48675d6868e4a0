/*
 * The helper wire protocol, defined once for both ends: rpcd (unprivileged)
 * and sepcsi-mounthelper (privileged). One message per SOCK_SEQPACKET datagram:
 *
 *   offset 0  u16 version   (MH_PROTO_VERSION)
 *   offset 2  u16 type      (enum mh_type)
 *   offset 4  u32 id        (request id, echoed by the answer)
 *   offset 8  u32 length    (payload bytes that follow; header + payload <= MH_MSG_MAX)
 *
 * All integers are big-endian. A string is a u16 length followed by that many
 * bytes, no NUL, never longer than the field's bound. No C struct, size_t or
 * padding ever crosses the wire. Decoding is strict: a wrong version, an unknown
 * type, a length that disagrees with the datagram, a short field, an over-long
 * or NUL-containing string, or bytes left over all fail the whole message.
 */
#ifndef SEPCSI_MH_PROTO_H
#define SEPCSI_MH_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define MH_PROTO_VERSION 1
#define MH_HDR_LEN       12
#define MH_MSG_MAX       16384
#define MH_ID_MAX        64   /* volume and snapshot ids */
#define MH_PATH_MAX      4095 /* staging and target paths */
#define MH_FSTYPE_MAX    16
#define MH_OPTS_MAX      4096 /* comma-separated mount options */
#define MH_REASON_MAX    255

enum mh_type {
	MH_REQ_PING = 1,
	MH_ANS_PING = 2,
	MH_REQ_CREATE = 3, /* create a sparse backing image */
	MH_ANS_CREATE = 4,
	MH_REQ_DELETE = 5, /* delete a backing image */
	MH_ANS_DELETE = 6,
	MH_REQ_STAGE = 7, /* attach loop, format if blank, mount at staging path */
	MH_ANS_STAGE = 8,
	MH_REQ_UNSTAGE = 9, /* unmount staging path, detach loop */
	MH_ANS_UNSTAGE = 10,
	MH_REQ_PUBLISH = 11, /* bind the staged mount onto the target path */
	MH_ANS_PUBLISH = 12,
	MH_REQ_UNPUBLISH = 13, /* unmount and remove the target path */
	MH_ANS_UNPUBLISH = 14,
	MH_ANS_ERROR = 100, /* any request may be answered with this */
};

/* Why an operation was not done; carried in MH_ANS_ERROR. */
enum mh_err_kind {
	MH_E_OK = 0,
	MH_E_REFUSED = 1,      /* input outside the policy or malformed: nothing touched */
	MH_E_NOTFOUND = 2,     /* the volume's image (or the path asked for) does not exist */
	MH_E_EXISTS = 3,       /* something incompatible is already there */
	MH_E_BUSY = 4,         /* in use (mounted, attached, EBUSY) */
	MH_E_NOSPACE = 5,      /* the data directory is full */
	MH_E_FAILED = 6,       /* the operation was tried and failed */
	MH_E_PRECONDITION = 7, /* e.g. publish of a volume that is not staged */
	MH_E_UNAVAILABLE = 8,  /* client side only: the helper is gone or the channel broke */
};

struct mh_req_create {
	char volume_id[MH_ID_MAX + 1];
	uint64_t size_bytes;
};

struct mh_req_volume { /* MH_REQ_DELETE */
	char volume_id[MH_ID_MAX + 1];
};

struct mh_req_stage {
	char volume_id[MH_ID_MAX + 1];
	char staging_path[MH_PATH_MAX + 1];
	char fs_type[MH_FSTYPE_MAX + 1];
	char mount_flags[MH_OPTS_MAX + 1]; /* comma-separated, may be empty */
	uint8_t readonly;                  /* 0 or 1; anything else is a violation */
};

struct mh_req_unstage {
	char volume_id[MH_ID_MAX + 1];
	char staging_path[MH_PATH_MAX + 1];
};

struct mh_req_publish {
	char volume_id[MH_ID_MAX + 1];
	char staging_path[MH_PATH_MAX + 1];
	char target_path[MH_PATH_MAX + 1];
	uint8_t readonly; /* 0 or 1 */
};

struct mh_req_unpublish {
	char volume_id[MH_ID_MAX + 1];
	char target_path[MH_PATH_MAX + 1];
};

struct mh_ans_create {
	uint64_t size_bytes; /* the image's real size */
};

struct mh_ans_error {
	uint32_t kind;      /* enum mh_err_kind, never MH_E_OK or MH_E_UNAVAILABLE on the wire */
	uint32_t sys_errno; /* errno of the failed step, 0 if none */
	char reason[MH_REASON_MAX + 1];
};

/*
 * One decoded message. Only the union member that matches type is meaningful;
 * PING requests/answers and the empty answers (DELETE, STAGE, UNSTAGE,
 * PUBLISH, UNPUBLISH) carry no payload.
 */
struct mh_msg {
	uint16_t type;
	uint32_t id;
	union {
		struct mh_req_create create;
		struct mh_req_volume del;
		struct mh_req_stage stage;
		struct mh_req_unstage unstage;
		struct mh_req_publish publish;
		struct mh_req_unpublish unpublish;
		struct mh_ans_create create_ans;
		struct mh_ans_error error;
	} u;
};

/*
 * Encode m into out (capacity cap, at least MH_MSG_MAX is always enough) and set
 * *len. Returns 0, or -1 if a field is out of bounds (then nothing is to be sent).
 */
int mh_msg_encode(const struct mh_msg *m, uint8_t *out, size_t cap, size_t *len);

/*
 * Decode one whole datagram of len bytes into m. Returns 0, or -1 on any
 * protocol violation (m is then zeroed). Never reads past in + len.
 */
int mh_msg_decode(const uint8_t *in, size_t len, struct mh_msg *m);

/* Name of a message type for logs ("REQ_STAGE"), "UNKNOWN" otherwise. */
const char *mh_type_name(uint16_t type);

#endif
