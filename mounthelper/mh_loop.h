/* Loop devices for image volumes (mh_loop.c). */
#ifndef SEPCSI_MH_LOOP_H
#define SEPCSI_MH_LOOP_H

#include <stdbool.h>
#include <sys/types.h>

#include "mh.h"

#include <stddef.h>
#include <stdint.h>

struct mh_loop {
	int nr;            /* N of /dev/loopN */
	dev_t rdev;        /* its device number */
	uint32_t lo_flags; /* LO_FLAGS_* as the kernel reports them */
	bool block_ro;     /* read-only at the block layer alone (a raw block one) */
	char path[32];     /* "/dev/loopN" */
};

/*
 * Attach the image open as image_fd to a free loop device, name as
 * lo_file_name, read-only if asked, with autoclear unless it is for raw block
 * access (a bind of the device node does not hold the device open, so
 * autoclear would detach it at once). Returns the open loop device fd (the
 * caller closes it; with autoclear, once nothing else holds the device, e.g.
 * no mount, the kernel detaches it), or -1 with r filled. With direct I/O
 * at 512-byte blocks if direct (the data directory's forecast, made at the
 * helper's start: mh_main.c), out->lo_flags saying what the kernel did.
 */
int mh_loop_attach(int image_fd, const char *name, bool readonly, bool autoclear, bool direct,
                   struct mh_loop *out, struct mh_res *r);

/*
 * Pin the raw block device l unless a pin already holds it: a read-only loop
 * device of our own backed by it, so that a pod is never its only opener
 * (mh_loop.c, "pins"). mh_loop_attach pins every device it attaches without
 * autoclear; the detach removes its pins first. 0, or -1 with r.
 */
int mh_loop_pin(const struct mh_loop *l, struct mh_res *r);

/*
 * The records of which loop devices back which image, so that finding an
 * image's devices costs a look at each recorded one, not at every loop device
 * of the machine. A record grants nothing: every number in it is checked
 * against the image before use; it must only never miss a device holding
 * the image, whatever that device's name (mh_loop_bound, any_name). Two keepers, one
 * interface: the helper without a core keeps them on disk in <data-dir>/loops
 * (mh_loop_records.c: its workers are processes of their own); the core keeps
 * them in memory (core/core_loops.c: it is one process, and the only attacher
 * while it runs).
 *  - read: the numbers recorded for (dev, ino), or -1 when the keeper cannot
 *    say (then a look scans every device);
 *  - attach: before loopN is attached to (dev, ino), so a record never misses it;
 *  - rebuild: from one look at every loop device, at start before any request;
 *  - forget: with the image;
 *  - none: (dev, ino) has no device now (a raw block device's pins, just
 *    attached or all detached): an empty record, so no look scans for it.
 * The helper's alone: open (the directory, once at start) and new (a new image's
 * empty record).
 */
#define MH_LOOP_RECORD_MAX 16 /* more devices on one image than this: no record, looks scan */
int mh_loop_record_read(dev_t dev, ino_t ino, int nr[MH_LOOP_RECORD_MAX]);
void mh_loop_record_attach(dev_t dev, ino_t ino, int new_nr);
void mh_loop_records_rebuild(int images_fd);
void mh_loop_record_forget(dev_t dev, ino_t ino);
void mh_loop_record_none(dev_t dev, ino_t ino);
void mh_loop_records_open(int dirfd);
void mh_loop_record_new(int image_fd);

/*
 * 1 if /dev/loopN is bound to (dev, ino) (*out set unless NULL), 0 if not (or
 * unbound), -1 on error. Unless any_name, only a device sepcsi attached (its
 * lo_file_name a volume id): the only devices acted on. With any_name, whatever
 * its name (a pod holding its raw block device open for writing can rename it):
 * what the records keep, and what holds an image, never what is acted on.
 */
int mh_loop_bound(int nr, dev_t dev, ino_t ino, bool any_name, struct mh_loop *out);

/*
 * The devices bound to (dev, ino) as mh_loop_bound tells, at most max (out
 * NULL: only counted), by the image's record (mh_loop_record_read): the count,
 * or -1 with r. An image any device holds (any_name; at most
 * MH_LOOP_RECORD_MAX need be counted) is neither removed nor formatted.
 */
int mh_loop_find(dev_t dev, ino_t ino, bool any_name, struct mh_loop *out, size_t max,
                 struct mh_res *r);

/* The same by a look at each loop device, whatever the records say (their keeper's). */
int mh_loop_scan(dev_t dev, ino_t ino, bool any_name, struct mh_loop *out, size_t max,
                 struct mh_res *r);

/*
 * Whether a missing /dev/loopN node is made (true: the helper and the core).
 * sepcsi-reader, which shares the core's /dev and may make nothing, sets it
 * false: a node the core never made is of a device it never attached or
 * looked at, so none of its, and is answered as gone.
 */
extern bool mh_loop_make_nodes;

/* O_PATH fd of the helper's node /dev/loopN (made if missing); the caller closes. */
int mh_loop_node(const struct mh_loop *l, struct mh_res *r);

/*
 * What backs loopN: its backing file's identity, (0, the node's number) for a
 * device node (a pin: no image is named so), and the name the helper gave it
 * at attach time (lo_file_name: the volume id). 0, or -1 with errno:
 * ENXIO unbound, ENOENT no such device, another if it could not be asked.
 */
int mh_loop_status(int nr, struct mh_loop *out, dev_t *dev, ino_t *ino, char *name, size_t len);

/* Call fn(N) for each /dev/loopN the kernel has, until fn returns non-zero; that, or -1 with r. */
int mh_loop_each(int (*fn)(int nr, void *arg), void *arg, struct mh_res *r);

/*
 * Every loop device backed by (dev, ino), however many: the count, with *out
 * an array the caller frees (also on -1, with r).
 */
int mh_loop_list(dev_t dev, ino_t ino, struct mh_loop **out, struct mh_res *r);

/*
 * N when s is exactly prefix followed by N in decimal (no sign, no leading
 * zero): mh_loop_nr_of(src, "/dev/loop"), mh_loop_nr_of(name, "loop"); else -1.
 */
int mh_loop_nr_of(const char *s, const char *prefix);

/*
 * Leave loopN writable at the block layer for whoever attaches it next, if it
 * is bound to nothing (its device was torn down by someone else than the
 * core: the kernel keeps a read-only state, BLKROSET, for the number). The
 * core's, for numbers its records knew as a raw block device's (core_loops.c).
 */
void mh_loop_writable_if_unbound(int nr);

/* N of the loop device /dev/loopN with device number rdev, or -1 (not a loop device). */
int mh_loop_nr_of_rdev(dev_t rdev);

/*
 * The loop device with device number rdev, if it is backed by (dev, ino):
 * 1 (*out set), 0 (not a loop device, unbound, or backed by another file), -1 error.
 */
int mh_loop_by_rdev(dev_t rdev, dev_t dev, ino_t ino, struct mh_loop *out, struct mh_res *r);

/* LOOP_SET_CAPACITY: the device takes its backing file's new size. 0, or -1 with r. */
int mh_loop_set_capacity(const struct mh_loop *l, struct mh_res *r);

/* The device's size in bytes (BLKGETSIZE64); 0, or -1 with r. */
int mh_loop_size(const struct mh_loop *l, uint64_t *size, struct mh_res *r);

/*
 * Detach l, the device proved (dev, ino)'s, now (LOOP_CLR_FD, if it is still
 * that device bound to (dev, ino)), never waiting: 0 once it is gone (an
 * autoclear device after its last unmount, too). If someone else holds it
 * open, the kernel only marks it autoclear, and it goes when the holder closes
 * it: then -1, MH_E_BUSY with EALREADY (whoever asked may wait: mh_relay.c).
 */
int mh_loop_detach(const struct mh_loop *l, dev_t dev, ino_t ino, struct mh_res *r);

#endif
