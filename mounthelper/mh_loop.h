/* Loop devices for image volumes (mh_loop.c). */
#ifndef SEPCSI_MH_LOOP_H
#define SEPCSI_MH_LOOP_H

#include <stdbool.h>
#include <sys/types.h>

#include "mh.h"

struct mh_loop {
	int nr;        /* N of /dev/loopN */
	dev_t rdev;    /* its device number */
	char path[32]; /* "/dev/loopN" */
};

/*
 * Attach the image open as image_fd to a free loop device with autoclear, the
 * volume id as lo_file_name, read-only if asked. Returns the open loop device
 * fd (the caller closes it; once nothing else holds the device, e.g. no mount,
 * the kernel detaches it), or -1 with r filled.
 */
int mh_loop_attach(int image_fd, const char *volume_id, bool readonly, struct mh_loop *out,
                   struct mh_res *r);

/* Drop the device's cached blocks (BLKFLSBUF) after its backing file was written directly. */
int mh_loop_flush(int loop_fd, struct mh_res *r);

/* Find the loop device backed by the file (dev, ino): 1 found (*out set), 0 none, -1 error. */
int mh_loop_find(dev_t dev, ino_t ino, struct mh_loop *out, struct mh_res *r);

/*
 * Make sure no loop device is backed by (dev, ino) any more: wait briefly for
 * autoclear, then ask with LOOP_CLR_FD. 0 when detached, -1 (BUSY) otherwise.
 */
int mh_loop_ensure_detached(dev_t dev, ino_t ino, struct mh_res *r);

#endif
