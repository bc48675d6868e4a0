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

#include "mh_limits.h"

#define MH_PROTO_VERSION 9
#define MH_HDR_LEN       12
#define MH_MSG_MAX       16384

enum mh_type {
	/* The capable core's: every type it decodes; the rest are in mh_proto_all.h. */
	MH_REQ_PING = 1,
	MH_ANS_PING = 2,
	MH_REQ_STAGE = 7, /* attach loop, format if blank, mount at staging path */
	MH_ANS_STAGE = 8,
	MH_REQ_UNSTAGE = 9, /* unmount staging path, detach loop */
	MH_ANS_UNSTAGE = 10,
	MH_REQ_PUBLISH = 11, /* mount the staged file system (or bind its device) at the target */
	MH_ANS_PUBLISH = 12,
	MH_REQ_UNPUBLISH = 13, /* unmount and remove the target path */
	MH_ANS_UNPUBLISH = 14,
	MH_REQ_EXPAND = 25, /* refresh the loop size, grow the staged file system online */
	MH_ANS_EXPAND = 26,
	/* The capable core's own, from the orchestrating side; from rpcd a protocol violation. */
	MH_REQ_FREEZE = 51, /* freeze a staged volume's file system, for at most seconds */
	MH_ANS_FREEZE = 52,
	MH_REQ_THAW = 53, /* thaw it (struct mh_req_delete: the volume id) */
	MH_ANS_THAW = 54,
	MH_REQ_REFRESH =
	    55, /* the core's loop devices of an image take its new size (mh_req_delete) */
	MH_ANS_REFRESH = 56,     /* struct mh_ans_size: the image's size */
	MH_REQ_ATTACHED = 57,    /* how many loop devices back an image (mh_req_delete) */
	MH_ANS_ATTACHED = 58,    /* struct mh_ans_attached */
	MH_REQ_STAGE_CHECK = 59, /* what STAGE would refuse, nothing done: the core's reader's */
	MH_ANS_STAGE_CHECK = 60,
	MH_REQ_FLUSH = 61, /* write back a staged volume's file system, out of the core's thread */
	MH_ANS_FLUSH = 62,
	MH_ANS_ERROR = 100, /* any request may be answered with this */
};

/* Why an operation was not done; carried in MH_ANS_ERROR. */
enum mh_err_kind {
	MH_E_OK = 0,
	MH_E_REFUSED = 1,      /* input outside the policy or malformed: nothing touched */
	MH_E_NOTFOUND = 2,     /* the volume's image (or the path asked for) does not exist */
	MH_E_EXISTS = 3,       /* something incompatible is already there */
	MH_E_BUSY = 4,         /* in use (mounted, attached, EBUSY); with errno EINPROGRESS another
	                          operation on the id or path is in flight (from the core, to
	                          EXPAND: grown by a step, ask again), with EAGAIN every worker
	                          is taken */
	MH_E_NOSPACE = 5,      /* the data directory is full */
	MH_E_FAILED = 6,       /* the operation was tried and failed */
	MH_E_PRECONDITION = 7, /* e.g. publish of a volume that is not staged */
	MH_E_UNAVAILABLE = 8,  /* client side only: the helper is gone or the channel broke */
	MH_E_TIMEOUT = 9,      /* client side only: no answer within the call's deadline */
};

struct mh_req_delete { /* DELETE, THAW, REFRESH, ATTACHED, FLUSH: the volume id */
	char volume_id[MH_ID_MAX + 1];
};

struct mh_req_freeze {
	char volume_id[MH_ID_MAX + 1];
	uint32_t seconds; /* 1..MH_FREEZE_MAX_S; the core also holds it to the policy's limit */
};
#define MH_FREEZE_MAX_S 3600

/*
 * Flags of STAGE/UNSTAGE/PUBLISH/EXPAND/STATS (a u8 bit set on the wire; unknown
 * bits are a violation).
 *  BLOCK:      raw block access: STAGE attaches a loop device (read-only if
 *              readonly) without autoclear and binds its device node onto the
 *              file <staging_path>/dev; PUBLISH binds that onto a file it
 *              creates at target_path; UNSTAGE unmounts it and detaches.
 *  CREATE_DIR: STAGE creates staging_path (mkdir beneath its root) if missing
 *              (ephemeral inline volumes are staged straight at the target).
 *  REMOVE_DIR: UNSTAGE removes staging_path afterwards (rmdir, never recursive).
 *  MOUNT_GROUP: STAGE gives the file system's root directory group gid with
 *              setgid and g+rwx (CSI VOLUME_MOUNT_GROUP / Kubernetes fsGroup).
 */
#define MH_F_BLOCK       0x01
#define MH_F_CREATE_DIR  0x02
#define MH_F_REMOVE_DIR  0x04
#define MH_F_MOUNT_GROUP 0x08
#define MH_F_ONE_NODE    0x10 /* DIR_PUBLISH, shared base: a single-node access mode */
#define MH_F_ALL         0x1f

struct mh_req_stage {
	char volume_id[MH_ID_MAX + 1];
	char staging_path[MH_PATH_MAX + 1];
	char fs_type[MH_FSTYPE_MAX + 1];
	char mount_flags[MH_OPTS_MAX + 1]; /* comma-separated, may be empty */
	char mkfs_options[MH_OPTS_MAX +
	                  1]; /* space-separated, policy allowlist; used only by mkfs */
	uint8_t readonly;     /* 0 or 1; anything else is a violation */
	uint8_t flags;        /* MH_F_BLOCK | MH_F_CREATE_DIR | MH_F_MOUNT_GROUP */
	uint32_t gid;         /* with MH_F_MOUNT_GROUP */
};

struct mh_req_unstage {
	char volume_id[MH_ID_MAX + 1];
	char staging_path[MH_PATH_MAX + 1];
	uint8_t flags; /* MH_F_BLOCK | MH_F_REMOVE_DIR */
};

struct mh_req_publish {
	char volume_id[MH_ID_MAX + 1];
	char staging_path[MH_PATH_MAX + 1];
	char target_path[MH_PATH_MAX + 1];
	uint8_t readonly; /* 0 or 1 */
	uint8_t flags;    /* MH_F_BLOCK */
};

struct mh_req_unpublish {
	char volume_id[MH_ID_MAX + 1];
	char target_path[MH_PATH_MAX + 1];
};

struct mh_ans_size {         /* the answer of CREATE, RESIZE and EXPAND */
	uint64_t size_bytes; /* the image's real size */
};

struct mh_ans_attached {
	uint32_t devices; /* 1 if a loop device backs images/<id>.img now, else 0 */
};

struct mh_req_expand {
	char volume_id[MH_ID_MAX + 1];
	char staging_path[MH_PATH_MAX + 1]; /* where it is staged */
	char fs_type[MH_FSTYPE_MAX + 1];    /* "" with MH_F_BLOCK */
	uint8_t flags;                      /* MH_F_BLOCK */
};

struct mh_ans_error {
	uint32_t kind;      /* enum mh_err_kind, never MH_E_OK or a client-side kind on the wire */
	uint32_t sys_errno; /* errno of the failed step, 0 if none */
	char reason[MH_REASON_MAX + 1];
};

/*
 * One decoded message. Only the union member that matches type is meaningful;
 * PING and CAPACITY requests, PING answers and the empty answers (DELETE,
 * STAGE, UNSTAGE, PUBLISH, UNPUBLISH, DELETE_SNAPSHOT) carry no payload.
 *
 * The core's units see the core's payloads alone (they never include
 * mh_proto_all.h); every other program's see mh_proto_all.h first, whose
 * MH_MSG_MORE adds the rest (the build makes it so: proto/CMakeLists.txt).
 * Each program is one or the other throughout, and a message leaves a
 * process only as the wire format above, never as this struct.
 */
#ifndef MH_MSG_MORE
#ifndef MH_PROTO_CORE
#error "outside sepcsi-core, mh_proto_all.h comes first (its payloads are part of struct mh_msg)"
#endif
#define MH_MSG_MORE
#endif
struct mh_msg {
	uint16_t type;
	uint32_t id;
	union {
		struct mh_req_delete del; /* REQ_DELETE, REQ_THAW, REQ_REFRESH, REQ_ATTACHED */
		struct mh_ans_attached attached;
		struct mh_req_freeze freeze;
		struct mh_req_stage stage;
		struct mh_req_unstage unstage;
		struct mh_req_publish publish;
		struct mh_req_unpublish unpublish;
		struct mh_ans_size size_ans; /* ANS_CREATE, ANS_RESIZE, ANS_EXPAND, ANS_REFRESH */
		struct mh_req_expand expand;
		struct mh_ans_error error;
		MH_MSG_MORE
	} u;
};

/*
 * Encode m into out (capacity cap, at least MH_MSG_MAX is always enough) and
 * set *len: 0, or -1 if a field is out of bounds (then nothing is to be sent).
 * Decode one whole datagram of len bytes into m: 0, or -1 on any protocol
 * violation (m is then zeroed); never reads past in + len. Each for the
 * message types of one set only: mh_codecs_core, those the capable core
 * serves and answers (mh_msg.c; any other type fails as unknown),
 * mh_codecs_reader, or mh_codecs_all, every type (mh_msg_all.c, whose
 * mh_msg_encode and mh_msg_decode, for every other program, use it:
 * mh_proto_all.h).
 */
struct mh_codecs;
extern const struct mh_codecs mh_codecs_core, mh_codecs_reader, mh_codecs_all;
int mh_msg_encode_in(const struct mh_codecs *t, const struct mh_msg *m, uint8_t *out, size_t cap,
                     size_t *len);
int mh_msg_decode_in(const struct mh_codecs *t, const uint8_t *in, size_t len, struct mh_msg *m);

#endif
