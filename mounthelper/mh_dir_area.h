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

/* The base (ro: its read-only clone), O_RDONLY, root's alone: the fd, or -1 with r. */
int mh_dir_base_open(const struct mh_ctx *c, const char *base, bool ro, struct mh_res *r);

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

/* The volume's marked directory; NOTFOUND if it (or a directory above) is missing. */
int mh_dir_volume_open(int base, const struct mh_req_dir *q, struct mh_res *r);

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

#endif
