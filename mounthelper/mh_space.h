/*
 * What the data directory has promised: the sizes of all images and
 * snapshots, kept by the helper's main loop and checked before any request
 * that makes one bigger may start (mh_space.c).
 */
#ifndef SEPCSI_MH_SPACE_H
#define SEPCSI_MH_SPACE_H

#include <stddef.h>
#include <stdint.h>

#include "mh.h"

/* A request's claim on the data directory, from reserve to settle. */
struct mh_space_hold {
	int dir;                       /* images_fd or snaps_fd; -1: the request claims nothing */
	size_t n;                      /* its files there: one, or a group's snapshots */
	char name[MH_GROUP_MAX][64];   /* each file */
	uint64_t before[MH_GROUP_MAX]; /* its size when the request started (0: absent) */
	uint64_t reserved;             /* bytes held for the growth it asked for */
};

/*
 * At start, once c->max_file_bytes holds the largest file the data
 * directory's file system takes (the runner's probe; an ext4 with 4 KiB
 * blocks stops at 16 TiB; 0 if unknown): add up what exists.
 */
void mh_space_init(struct mh_ctx *c);

/*
 * The size check every growing request shares: size (asked) within the
 * policy's bounds and the largest file the data directory takes, rounded up
 * to 4 KiB into *out. 0, or -1 with r (REFUSED).
 */
int mh_space_size_ok(const struct mh_ctx *c, uint64_t size, uint64_t *out, struct mh_res *r);

/*
 * Main loop, before a worker starts req: claim the growth req asks for.
 * 0 (h filled; h->dir -1 if req claims nothing), or -1 with why: the
 * promised bytes would pass the data directory's size times the policy's
 * overcommit ratio.
 */
int mh_space_reserve(const struct mh_ctx *c, const struct mh_msg *req, struct mh_space_hold *h,
                     char *why, size_t whylen);

/* Main loop, after the worker ended: count what really changed, drop the hold. */
void mh_space_settle(struct mh_space_hold *h);

/*
 * What new volumes may still promise; and the largest volume there may be at
 * all (the policy's max_bytes and the largest file the data directory takes).
 */
uint64_t mh_space_available(const struct mh_ctx *c);
uint64_t mh_space_max_volume(const struct mh_ctx *c);

#endif
