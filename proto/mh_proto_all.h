/*
 * The helper protocol's message types and values that the capable core never
 * decodes (mh_proto.h has the wire format, every payload, and the core's own
 * types): images made and copied, capacity, usage, lists, directory volumes.
 * For rpcd, the helper, sepcsi-reader and the tests; the core includes none
 * of it, so it cannot even name a request it does not serve. Type numbers are
 * one space with mh_proto.h's: none is given twice (mh_msg_all.c's codec table
 * holds both).
 */
#ifndef SEPCSI_MH_PROTO_ALL_H
#define SEPCSI_MH_PROTO_ALL_H

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
