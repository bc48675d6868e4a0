/*
 * Directory volumes: the base and what lies beneath it (mh_dir_area.c).
 */
#ifndef SEPCSI_MH_DIR_AREA_H
#define SEPCSI_MH_DIR_AREA_H

#include <stdbool.h>

#include "mh_common.h"

/* The helper's own areas in a base, root's alone (0700). */
#define MH_DIR_WORK  ".sepcsi-work"      /* a volume or snapshot being made */
#define MH_DIR_TRASH ".sepcsi-trash"     /* a volume or snapshot being removed */
#define MH_DIR_SNAPS ".sepcsi-snapshots" /* snapshots */
#define MH_DIR_MARKS ".sepcsi-marks"     /* a shared base's marks, one record per inode */
#define MH_DIR_PUBS  ".sepcsi-published" /* a shared base's publications, on every node */
#define MH_DIR_NODES ".sepcsi-nodes"     /* a shared base's node plugins, by node id */
/* The longest node id a shared base takes: a publication record's name is at most NAME_MAX. */
#define MH_DIR_NODE_MAX (255 - POL_ID_LEN - (int)sizeof("@@0123456789abcdef@1") + 1)

/*
 * The base (ro: its read-only clone), O_RDONLY, root's alone: the fd, or -1
 * with r. It also chooses the marks every later call of this file reads and
 * writes, until the next base is opened: trusted.* attributes, or on a shared
 * base its records.
 */
int mh_dir_base_open(const struct mh_ctx *c, const char *base, bool ro, struct mh_res *r);

/*
 * At start, the i-th base, when the policy says it is shared: reachable, root's
 * alone as every base, not btrfs, and root's files there root's (an export
 * that squashes root fails); then, with a node id (a node plugin's helper), no
 * longer than MH_DIR_NODE_MAX, <base>/.sepcsi-nodes/<node> made. 0, or -1 with r.
 */
int mh_dir_shared_check(const struct mh_ctx *c, size_t i, const char *node, struct mh_res *r);

/* 0 if a node plugin with that node id has started on the shared base, else -1 with r. */
int mh_dir_node_known(int base, const char *node, struct mh_res *r);

/* Whether the base opened last is shared by every node (no quotas, records for marks). */
bool mh_dir_shared(void);

/*
 * The parent of name's last component beneath base, each directory on the way
 * root's alone; with create, missing ones are made (0755). at->dir, at->name.
 */
int mh_dir_locate(int base, const char *name, bool create, struct mh_at *at, struct mh_res *r);

/* One of the helper's areas in the base (MH_DIR_*), made with create: the fd, or -1 with r. */
int mh_dir_area(int base, const char *which, bool create, struct mh_res *r);

/*
 * Open the directory name in dir if it carries id's mark: the fd; -1 with r
 * NOTFOUND if it is absent, EXISTS if something else is there.
 */
int mh_dir_open_marked(int dir, const char *name, const char *id, struct mh_res *r);

/*
 * The volume's marked directory (kept_too: or marked kept, for an unpublish);
 * NOTFOUND if it (or a directory above) is missing.
 */
int mh_dir_volume_open(int base, const struct mh_req_dir *q, bool kept_too, struct mh_res *r);

/*
 * Remove the tree name (an id) in one of the helper's areas, if present and
 * proved that id's (its mark, or an empty unmarked directory). 0, or -1 with r.
 */
int mh_dir_purge(const struct mh_ctx *c, int area_fd, const char *name, struct mh_res *r);

/* Rename name in dir into the trash area of base, and remove it there. 0, or -1 with r. */
int mh_dir_trash(const struct mh_ctx *c, int base, int dir, const char *name, const char *id,
                 struct mh_res *r);

/*
 * Make id's directory in the work area, marked: on btrfs a subvolume, a
 * writable snapshot of src (*whole) when src (>= 0) is one; else empty, mode
 * 0755. The fd, or -1 with r.
 */
int mh_dir_work_make(const struct mh_ctx *c, int work, const char *id, int src, bool *whole,
                     struct mh_res *r);

/*
 * This helper's node id (--node-id), named in its publications' records (NULL:
 * none), and whether it serves a node plugin only (--node-only: it leaves the
 * shared bases' work and trash areas to the controller's helper).
 */
void mh_dir_set_node(const char *node, bool only);

/*
 * The shared base's record of volume id's publication at target by this
 * node: written, in a single-node access mode (one 1) or not (0; *made when
 * this call made it), or removed (one -1). 0, or -1 with r (REFUSED without a
 * node id).
 */
int mh_dir_pub_note(const char *id, const char *target, int one, bool *made, struct mh_res *r);
/*
 * A failed publish's undo: only the record it made (mode one) goes, never the
 * other mode's, which an earlier publication at the same target may hold.
 */
void mh_dir_pub_undo(const char *id, const char *target, bool one);

/*
 * 0 if no other node publishes volume id in a way a publication here cannot
 * stand beside (one: any other node's; else one made in a single-node mode),
 * else 1 with r PRECONDITION (or -1).
 */
int mh_dir_other_nodes(const char *id, bool one, struct mh_res *r);

/* 0 if no node publishes volume id on the shared base, else 1 with r PRECONDITION (or -1). */
int mh_dir_published(const char *id, struct mh_res *r);

/*
 * On a shared base, after volume id's directory moved from dir/name to
 * to/to_name: moved back, and -1 with r PRECONDITION, if a node publishes it.
 */
int mh_dir_still_free(const char *id, int dir, const char *name, int to, const char *to_name,
                      struct mh_res *r);

/* Retain and archive: the mark of the volume's directory fd becomes a kept one's. */
int mh_dir_keep(int fd, const char *id, struct mh_res *r);

#endif
