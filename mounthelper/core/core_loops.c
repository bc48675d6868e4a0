/*
 * The core's records of which loop devices back which image (the interface
 * and what a record may claim: mh_loop.h), kept in memory.
 *
 * Safety argument. A record grants nothing: every number is checked against
 * the image before use. It must only never miss a device, and here:
 *  - at start, before the first request, one look at every loop device
 *    records each bound device by its backing file's identity; if that look
 *    fails, no record is trusted and every look scans;
 *  - while the core runs it is the only process that attaches sepcsi's images
 *    (the helper beside it holds no capability, and a helper that mounts by
 *    itself runs no core), and every attach goes through mh_loop_attach, which
 *    records the number first;
 * so an image with no record has no device, and its look costs nothing, where
 * the helper's records on disk make it scan. A device someone else attaches
 * to one of our images is never ours (mh_loop_bound), recorded or not; every
 * device that holds an image is recorded, whatever its name (any_name:
 * a pod may rename its raw block device), so that the image is never removed
 * or formatted under it.
 * Memory: when the table is full, records of images no device backs any more
 * go before it grows, so it holds at most about twice the images devices back.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mh_loop.h"

struct record {
	dev_t dev;
	ino_t ino;
	int n; /* how many in nr, or -1: more than MH_LOOP_RECORD_MAX, looks scan */
	int nr[MH_LOOP_RECORD_MAX];
};

static struct record *records;
static size_t nrecords, room;
static bool complete; /* every device sepcsi attached is recorded */

/*
 * Keep only the numbers that still back their image, and the records left
 * with any: with a complete table, an image none backs has no device. One
 * that cannot be asked stays, as does a record too long to keep.
 */
static void compact(void)
{
	size_t k = 0;
	for (size_t i = 0; i < nrecords; i++) {
		struct record e = records[i];
		int m = 0;
		for (int j = 0; j < e.n; j++)
			if (mh_loop_bound(e.nr[j], e.dev, e.ino, true, NULL) != 0)
				e.nr[m++] = e.nr[j];
		if (e.n > 0)
			e.n = m;
		if (e.n != 0)
			records[k++] = e;
	}
	char before[24], after[24];
	snprintf(before, sizeof(before), "%zu", nrecords);
	snprintf(after, sizeof(after), "%zu", k);
	log_kv(LOG_LVL_DEBUG, "loop_records_compacted", "before", before, "after", after, NULL);
	nrecords = k;
}

static struct record *find(dev_t dev, ino_t ino, bool add)
{
	for (size_t i = 0; i < nrecords; i++)
		if (records[i].dev == dev && records[i].ino == ino)
			return &records[i];
	if (!add)
		return NULL;
	/* Images attached once and detached since leave records: when full, those go first. */
	if (nrecords == room) {
		if (room > 0)
			compact();
		if (nrecords >= room / 2) {
			room = room ? 2 * room : 64;
			records = realloc(records, room * sizeof(*records));
			if (!records)
				abort(); /* allocation failure aborts (docs/error-handling.md) */
		}
	}
	records[nrecords] = (struct record){.dev = dev, .ino = ino};
	return &records[nrecords++];
}

int mh_loop_record_read(dev_t dev, ino_t ino, int nr[MH_LOOP_RECORD_MAX])
{
	const struct record *e = find(dev, ino, false);
	if (!complete || (e && e->n < 0))
		return -1;
	if (!e)
		return 0;
	memcpy(nr, e->nr, (size_t)e->n * sizeof(*nr));
	return e->n;
}

static void add(struct record *e, int nr)
{
	if (e->n >= 0 && e->n < MH_LOOP_RECORD_MAX)
		e->nr[e->n++] = nr;
	else
		e->n = -1;
}

void mh_loop_record_attach(dev_t dev, ino_t ino, int new_nr)
{
	struct record *e = find(dev, ino, true);
	int k = 0;
	if (e->n < 0)
		return;
	/* Devices that no longer back the image go; one that cannot be asked stays. */
	for (int i = 0; i < e->n; i++)
		if (e->nr[i] != new_nr && mh_loop_bound(e->nr[i], dev, ino, true, NULL) != 0)
			e->nr[k++] = e->nr[i];
	e->n = k;
	add(e, new_nr);
}

void mh_loop_record_forget(dev_t dev, ino_t ino)
{
	struct record *e = find(dev, ino, false);
	if (e)
		*e = records[--nrecords];
}

static int note(int nr, void *arg)
{
	struct mh_loop l;
	dev_t dev;
	ino_t ino;
	char name[64];
	if (mh_loop_status(nr, &l, &dev, &ino, name, sizeof(name)) == 0)
		add(find(dev, ino, true), nr); /* whatever its name: it holds that file */
	else if (errno != ENXIO && errno != ENOENT)
		*(bool *)arg = false; /* a device that cannot be asked: trust no record */
	return 0;
}

void mh_loop_records_rebuild(int images_fd)
{
	struct mh_res ignore = {0};
	bool all = true;
	(void)images_fd;
	nrecords = 0;
	complete = mh_loop_each(note, &all, &ignore) == 0 && all;
}
