/*
 * The helper protocol's message types, payloads and values that the capable
 * core never decodes (mh_proto.h has the wire format and the core's own):
 * images made and copied, capacity, usage, lists, directory volumes. For
 * rpcd, the helper, sepcsi-reader and the tests, whose every unit reads this
 * file before mh_proto.h (the build puts it first); the core includes none
 * of it, so it cannot even name a request it does not serve, and its struct
 * mh_msg holds none of these payloads. Type numbers are one space with
 * mh_proto.h's: none is given twice (mh_msg_all.c's codec table holds both).
 */
#ifndef SEPCSI_MH_PROTO_ALL_H
#define SEPCSI_MH_PROTO_ALL_H

#ifdef SEPCSI_MH_PROTO_H
#error "mh_proto_all.h comes before mh_proto.h: its payloads are part of struct mh_msg"
#endif
#ifdef MH_PROTO_CORE
#error "sepcsi-core decodes its own messages only"
#endif

#include <stdint.h>

#include "mh_limits.h"

/* The payloads of these types, and how struct mh_msg holds them. */
struct mh_req_create {
	char volume_id[MH_ID_MAX + 1];
	uint64_t size_bytes;
};

struct mh_req_resize {
	char volume_id[MH_ID_MAX + 1];
	uint64_t size_bytes; /* new size; smaller than the image is refused */
};

struct mh_req_snapshot {
	char snapshot_id[MH_ID_MAX + 1]; /* "ss-" + 32 hex: <data>/snapshots/<id>.img */
	char volume_id[MH_ID_MAX + 1];
};

struct mh_req_snapshot_id { /* MH_REQ_DELETE_SNAPSHOT */
	char snapshot_id[MH_ID_MAX + 1];
};

struct mh_req_clone {
	char volume_id[MH_ID_MAX + 1]; /* the new volume */
	uint8_t source_kind;           /* MH_SRC_SNAPSHOT or MH_SRC_VOLUME */
	char source_id[MH_ID_MAX + 1];
	uint64_t size_bytes; /* at least the source's size; the copy is grown to it */
};

struct mh_ans_copy { /* answer of SNAPSHOT and CLONE */
	uint64_t size_bytes;
	uint8_t reflinked; /* 1: FICLONE shared the extents; 0: sparse copy */
};

#define MH_GROUP_MAX 16 /* volumes in one GROUP_SNAPSHOT */

/*
 * GROUP_SNAPSHOT: member i is volume_id[i], copied to snapshot_id[i]; n
 * members (2 to MH_GROUP_MAX), every slot after them empty. Every member's
 * file system is frozen before the first is copied and thawed after the last.
 */
struct mh_req_group {
	uint32_t n;
	char volume_id[MH_GROUP_MAX][MH_ID_MAX + 1];
	char snapshot_id[MH_GROUP_MAX][MH_ID_MAX + 1];
};

struct mh_ans_group { /* each member's snapshot size, in the request's order */
	uint64_t size_bytes[MH_GROUP_MAX];
	uint8_t reflinked; /* 1: every copy shared the extents */
};

#define MH_BLOCKS_MAX 512 /* ranges in one BLOCKS answer */

/*
 * BLOCKS: the ranges of one page, from offset on, read from the snapshot
 * images by the tools runner (never from a volume in use). Ranges are
 * ascending, disjoint, of 4 KiB blocks (the last may end at the image's end);
 * the first ends after offset. The next page starts at next; next ==
 * size_bytes: there is none.
 */
struct mh_req_blocks {
	uint32_t what;                   /* MH_BLOCKS_ALLOCATED or MH_BLOCKS_DELTA */
	char snapshot_id[MH_ID_MAX + 1]; /* the target */
	char base_id[MH_ID_MAX + 1];     /* DELTA: the base; ALLOCATED: "" */
	uint64_t offset;                 /* at most the target's size */
};

struct mh_ranges {
	uint32_t n;
	uint64_t v[MH_BLOCKS_MAX][2]; /* byte offset, length */
};

struct mh_ans_blocks {
	uint64_t size_bytes; /* the target image's size */
	uint64_t next;
	struct mh_ranges ranges;
};

struct mh_ans_capacity {
	uint64_t available_bytes;  /* what new volumes may still promise (free, within the ratio) */
	uint64_t total_bytes;      /* the data directory's file-system size */
	uint64_t max_volume_bytes; /* the largest size CREATE accepts at all (space aside) */
	uint8_t reflink;           /* 1 if the data directory's file system supports FICLONE */
	uint8_t quota;     /* DIR_CAPACITY: 1 if the base enforces project quotas (else advisory) */
	uint8_t direct_io; /* CAPACITY: 1 if loop devices read the images with direct I/O */
	uint8_t shared;    /* DIR_CAPACITY: 1 if the base is shared by every node (policy) */
};

/*
 * Every directory-volume request (MH_REQ_DIR_*). Each type uses the fields
 * its comment names; the others must be empty or 0 (the helper refuses
 * anything else), so one shape serves them all.
 */
struct mh_req_dir {
	char volume_id[MH_ID_MAX + 1];   /* all but DIR_CAPACITY, DIR_DELETE_SNAPSHOT, DIR_NODE */
	char base[MH_PATH_MAX + 1];      /* all: one of the policy's base_dirs, exactly */
	char name[MH_DIRNAME_MAX + 1];   /* the volume's directory beneath base (not CAPACITY);
	                                    DIR_NODE: a node id, one component */
	char path[MH_PATH_MAX + 1];      /* DIR_PUBLISH, DIR_UNPUBLISH, DIR_STATS: the target */
	char snapshot_id[MH_ID_MAX + 1]; /* DIR_SNAPSHOT, DIR_DELETE_SNAPSHOT */
	uint8_t source_kind;             /* DIR_CREATE: 0, MH_SRC_SNAPSHOT or MH_SRC_VOLUME */
	char source_id[MH_ID_MAX + 1];   /* DIR_CREATE with a source */
	char source_name[MH_DIRNAME_MAX + 1]; /* DIR_CREATE from a volume: its name */
	uint64_t size_bytes;                  /* DIR_CREATE, DIR_EXPAND: the quota */
	uint8_t mode;  /* DIR_DELETE: MH_DIR_*; DIR_PUBLISH: readonly (0 or 1) */
	uint8_t flags; /* DIR_PUBLISH: MH_F_MOUNT_GROUP, MH_F_ONE_NODE */
	uint32_t gid;  /* with MH_F_MOUNT_GROUP */
};

struct mh_ans_dir {          /* the answer of DIR_CREATE and DIR_EXPAND */
	uint64_t size_bytes; /* the quota's hard limit (the size asked when advisory) */
	uint8_t quota;       /* 1: a project quota enforces it; 0: advisory */
	uint8_t reflinked;   /* DIR_CREATE from a source: every file was reflinked */
};

struct mh_req_stats {
	char volume_id[MH_ID_MAX + 1];
	char path[MH_PATH_MAX + 1]; /* a staging or target path of this volume */
	uint8_t flags;              /* MH_F_BLOCK */
};

struct mh_ans_stats {
	uint64_t bytes_total, bytes_available, bytes_used;
	uint64_t inodes_total, inodes_free, inodes_used; /* 0 for block volumes */
	uint8_t abnormal; /* 1: mount gone, loop detached, or file system errors */
	char message[MH_REASON_MAX + 1];
};

struct mh_req_list {
	uint32_t what;             /* MH_LIST_* (mh_proto_all.h) */
	char after[MH_ID_MAX + 1]; /* the cursor: the last id (a mount id in decimal) of the
	                              page before, "" for the first page */
};

struct mh_ans_list {
	uint8_t more; /* 1: entries after this page remain */
	char text[MH_LIST_TEXT_MAX + 1];
};

/* The members of struct mh_msg's union beside the core's (mh_proto.h). */
#define MH_MSG_MORE                                                                                \
	struct mh_req_create create;                                                               \
	struct mh_req_resize resize;                                                               \
	struct mh_req_snapshot snapshot;                                                           \
	struct mh_req_snapshot_id del_snapshot;                                                    \
	struct mh_req_clone clone;                                                                 \
	struct mh_ans_copy copy_ans; /* ANS_SNAPSHOT, ANS_CLONE, ANS_DIR_SNAPSHOT */               \
	struct mh_req_group group;                                                                 \
	struct mh_ans_group group_ans;                                                             \
	struct mh_req_blocks blocks;                                                               \
	struct mh_ans_blocks blocks_ans;                                                           \
	struct mh_ans_capacity capacity_ans; /* ANS_CAPACITY, ANS_DIR_CAPACITY */                  \
	struct mh_req_stats stats;                                                                 \
	struct mh_ans_stats stats_ans; /* ANS_STATS, ANS_DIR_STATS */                              \
	struct mh_req_list list;                                                                   \
	struct mh_ans_list list_ans;                                                               \
	struct mh_req_dir dir;     /* every REQ_DIR_* */                                           \
	struct mh_ans_dir dir_ans; /* ANS_DIR_CREATE, ANS_DIR_EXPAND */

#include "mh_proto.h"

enum mh_type_more {
	MH_REQ_CREATE = 3, /* create a sparse backing image */
	MH_ANS_CREATE = 4,
	MH_REQ_DELETE = 5, /* delete a backing image */
	MH_ANS_DELETE = 6,
	MH_REQ_RESIZE = 15, /* grow an image (never shrink); refresh its loop device */
	MH_ANS_RESIZE = 16,
	MH_REQ_SNAPSHOT = 17, /* copy an image to a snapshot: reflink, else sparse copy */
	MH_ANS_SNAPSHOT = 18,
	MH_REQ_DELETE_SNAPSHOT = 19,
	MH_ANS_DELETE_SNAPSHOT = 20,
	MH_REQ_CLONE = 21, /* new image from a snapshot or a volume, then grown to size */
	MH_ANS_CLONE = 22,
	MH_REQ_CAPACITY =
	    23, /* what the data directory may still promise, its size, largest volume */
	MH_ANS_CAPACITY = 24,
	MH_REQ_STATS = 27, /* usage and condition of a staged or published volume */
	MH_ANS_STATS = 28,
	MH_REQ_LIST = 29, /* one page of what the helper made: images, snapshots or mounts */
	MH_ANS_LIST = 30,
	/* Directory volumes: a directory per volume beneath a base directory (struct mh_req_dir).
	 */
	MH_REQ_DIR_CREATE = 31, /* mkdir, mark, project quota; or a copy of a snapshot/volume */
	MH_ANS_DIR_CREATE = 32,
	MH_REQ_DIR_DELETE = 33, /* delete the tree, retain it, or rename it archived-<name> */
	MH_ANS_DIR_DELETE = 34,
	MH_REQ_DIR_EXPAND = 35, /* raise the project quota */
	MH_ANS_DIR_EXPAND = 36,
	MH_REQ_DIR_PUBLISH = 37, /* bind the volume's directory onto a target, nosuid,nodev */
	MH_ANS_DIR_PUBLISH = 38,
	MH_REQ_DIR_UNPUBLISH = 39, /* unmount the volume's bind at a target, remove the target */
	MH_ANS_DIR_UNPUBLISH = 40,
	MH_REQ_DIR_STATS = 41, /* usage against the quota, through a target it is bound on */
	MH_ANS_DIR_STATS = 42,
	MH_REQ_DIR_CAPACITY = 43, /* a base directory's space and whether it has project quotas */
	MH_ANS_DIR_CAPACITY = 44,
	MH_REQ_DIR_SNAPSHOT = 45, /* copy the volume's tree to <base>/.sepcsi-snapshots/<id> */
	MH_ANS_DIR_SNAPSHOT = 46,
	MH_REQ_DIR_DELETE_SNAPSHOT = 47,
	MH_ANS_DIR_DELETE_SNAPSHOT = 48,
	/* The helper's own, from its main loop to a worker; from rpcd a protocol violation. */
	MH_REQ_PURGE = 49, /* remove what dead operations left of one id (struct mh_req_dir) */
	MH_ANS_PURGE = 50,
	MH_REQ_GROUP_SNAPSHOT = 63, /* SNAPSHOT of several volumes at one point in time */
	MH_ANS_GROUP_SNAPSHOT = 64,
	MH_REQ_BLOCKS = 65, /* one page of a snapshot's allocated ranges, or of two's differences */
	MH_ANS_BLOCKS = 66,
	MH_REQ_DIR_NODE = 67, /* has a node plugin of this node id started on a shared base */
	MH_ANS_DIR_NODE = 68,
};

/* mh_msg_encode_in and mh_msg_decode_in with mh_codecs_all (mh_proto.h). */
int mh_msg_encode(const struct mh_msg *m, uint8_t *out, size_t cap, size_t *len);
int mh_msg_decode(const uint8_t *in, size_t len, struct mh_msg *m);

/* Name of a message type for logs ("REQ_STAGE"), "UNKNOWN" otherwise. */
const char *mh_type_name(uint16_t type);

/* Where CLONE and DIR_CREATE copy from (source_kind). */
#define MH_SRC_SNAPSHOT 1
#define MH_SRC_VOLUME   2

/* What BLOCKS answers (what). */
#define MH_BLOCKS_ALLOCATED 1 /* the ranges of snapshot_id that hold data */
#define MH_BLOCKS_DELTA     2 /* the ranges where snapshot_id differs from base_id */

/* What DIR_DELETE does with the volume's directory (mode). */
#define MH_DIR_DELETE  0 /* remove the tree, never following a symlink or leaving it */
#define MH_DIR_RETAIN  1 /* leave it where it is, with its quota */
#define MH_DIR_ARCHIVE 2 /* rename it archived-<last component> in the same directory */

/* What MH_REQ_LIST lists; each page holds the entries after the cursor, in order. */
#define MH_LIST_IMAGES    1 /* "<volume id> <size>\n", by id */
#define MH_LIST_SNAPSHOTS 2 /* "<snapshot id> <size>\n", by id */
#define MH_LIST_MOUNTS                                                                             \
	3 /* "<mount id> <f|b> <volume id> <path>\n", by mount id: a file                          \
	     system of a volume's loop device, or a bind of its node */

#endif
