/*
 * The core's records of which loop devices back which image (the interface
 * and what a record may claim: mh_loop.h), kept in memory: for each loop
 * number, the image (its st_dev, st_ino) the core last knew that device
 * bound to. The numbers recorded for an image are those whose entry names it.
 *
 * Safety argument. A record grants nothing: every number is checked against
 * the image before use (LOOP_GET_STATUS64, mh_loop_bound). It must only never
 * miss a device, and here:
 *  - at start, before the first request, one look at every loop device
 *    records each bound device by its backing file's identity; if that look
 *    fails, no record is trusted and every look scans;
 *  - while the core runs it is the only process that attaches sepcsi's images
 *    (the helper beside it holds no capability, and a helper that mounts by
 *    itself runs no core), and every attach goes through mh_loop_attach, which
 *    records the number first;
 *  - an entry is only ever replaced by the core's own attach of that number,
 *    which LOOP_CTL_GET_FREE gave as unbound: the image it named held nothing
 *    through it any more; an image's entries go with the image (forget), or at
 *    its next attach those of its devices that no longer hold it;
 * so an image with no record has no device, and its look costs nothing, where
 * the helper's records on disk make it scan. A device someone else attaches
 * to one of our images is never ours (mh_loop_bound), recorded or not; every
 * device that holds an image is recorded, whatever its name (any_name:
 * a pod may rename its raw block device), so that the image is never removed
 * or formatted under it.
 * Memory: one entry per loop number up to the highest the core has met
 * (LOOP_CTL_GET_FREE gives the lowest free one, and only root makes others;
 * never past 2^20, the kernel's last), whatever the number of images made and
 * removed.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mh_loop.h"

struct entry {
	bool bound; /* recorded as attached to (dev, ino) */
	dev_t dev;
	ino_t ino;
};

static struct entry *by_nr; /* indexed by loop number */
static size_t room;
static bool complete; /* every device sepcsi attached is recorded */

/* Record loopN as (dev, ino)'s; a number no device can have: no record is trusted. */
static void note_nr(int nr, dev_t dev, ino_t ino)
{
	if (nr < 0 || nr > 1 << 20) {
		complete = false;
		return;
	}
	if ((size_t)nr >= room) {
		by_nr = realloc(by_nr, ((size_t)nr + 1) * sizeof(*by_nr));
		if (!by_nr)
			abort(); /* allocation failure aborts (docs/error-handling.md) */
		memset(&by_nr[room], 0, ((size_t)nr + 1 - room) * sizeof(*by_nr));
		room = (size_t)nr + 1;
		char n[24];
		snprintf(n, sizeof(n), "%zu", room);
		log_kv(LOG_LVL_DEBUG, "loop_records_grown", "room", n, NULL);
	}
	by_nr[nr] = (struct entry){.bound = true, .dev = dev, .ino = ino};
}

/* Whether the entry of loopN names the image (dev, ino). */
static bool names(size_t nr, dev_t dev, ino_t ino)
{
	return by_nr[nr].bound && by_nr[nr].dev == dev && by_nr[nr].ino == ino;
}

/*
 * loopN no longer holds the image its entry names. Torn down by someone else
 * than the core (a tenant's LOOP_CLR_FD, a holder's last close), a read-only
 * raw block device leaves its number read-only for the next attacher: made
 * writable again, if it is still bound to nothing.
 */
static void drop(size_t nr)
{
	by_nr[nr].bound = false;
	mh_loop_writable_if_unbound((int)nr);
}

int mh_loop_record_read(dev_t dev, ino_t ino, int nr[MH_LOOP_RECORD_MAX])
{
	int n = 0;
	if (!complete)
		return -1;
	for (size_t i = 0; i < room; i++)
		if (names(i, dev, ino)) {
			if (n == MH_LOOP_RECORD_MAX)
				return -1; /* more than a record holds: looks scan */
			nr[n++] = (int)i;
		}
	return n;
}

void mh_loop_record_attach(dev_t dev, ino_t ino, int new_nr)
{
	/* Devices that no longer back the image go; one that cannot be asked stays. The
	 * number about to be attached is left as it is: the attach sets its state. */
	for (size_t i = 0; i < room; i++)
		if (names(i, dev, ino) && (int)i != new_nr &&
		    mh_loop_bound((int)i, dev, ino, true, NULL) == 0)
			drop(i);
	note_nr(new_nr, dev, ino);
}

/* Every record is whole in memory: none is an empty one. */
void mh_loop_record_none(dev_t dev, ino_t ino)
{
	mh_loop_record_forget(dev, ino);
}

void mh_loop_record_forget(dev_t dev, ino_t ino)
{
	for (size_t i = 0; i < room; i++)
		if (names(i, dev, ino))
			drop(i);
}

static int note(int nr, void *arg)
{
	(void)arg;
	struct mh_loop l;
	dev_t dev;
	ino_t ino;
	char name[64];
	if (mh_loop_status(nr, &l, &dev, &ino, name, sizeof(name)) == 0)
		note_nr(nr, dev, ino); /* whatever its name: it holds that file */
	else if (errno != ENXIO && errno != ENOENT)
		complete = false; /* a device that cannot be asked: trust no record */
	return 0;
}

void mh_loop_records_rebuild(int images_fd)
{
	struct mh_res ignore = {0};
	(void)images_fd;
	if (room > 0)
		memset(by_nr, 0, room * sizeof(*by_nr));
	complete = true; /* unless the look, or a device in it, fails */
	if (mh_loop_each(note, NULL, &ignore) < 0)
		complete = false;
}
