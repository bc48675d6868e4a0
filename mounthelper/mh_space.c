/*
 * Capacity: images are sparse, so nothing in the kernel stops fifty volumes
 * of 1 TiB each on a 100 GiB data directory until writes (mkfs already
 * writes gigabytes of metadata) fail inside the pods. The helper counts what
 * it has promised instead: the apparent size of every image and snapshot.
 * CREATE, CLONE, SNAPSHOT and RESIZE may start only if the promised bytes,
 * with the growth every request in flight has claimed, stay within the data
 * directory's file-system size times the policy's overcommit ratio (1.0 by
 * default: never more than the disk). rpcd answers RESOURCE_EXHAUSTED and
 * GetCapacity reports what is left; the count is the helper's own, so a
 * compromised rpcd cannot talk it into more.
 *
 * Runs in the helper's main loop (reserve, settle, CAPACITY) as root; the
 * counters live only there. O(1) per request: the count is built once at
 * start by listing both directories and kept up to date by re-reading the
 * one file each request touched. Nothing here is fatal.
 */
#include "mh_space.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "log.h"
#include "mh_image_life.h"
#include "mh_proto_all.h"
#include "policy_all.h"

static uint64_t promised; /* sizes of all images and snapshots */
static uint64_t reserved; /* growth claimed by requests in flight */

static void add_image(int dirfd, const char *name, void *arg)
{
	struct stat st;
	size_t n = strlen(name);
	if (n > 4 && strcmp(name + n - 4, ".img") == 0 &&
	    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
		*(uint64_t *)arg += (uint64_t)st.st_size;
}

static uint64_t sum_dir(int dirfd)
{
	uint64_t sum = 0;
	(void)mh_dir_each(dirfd, add_image, &sum);
	return sum;
}

void mh_space_init(struct mh_ctx *c)
{
	promised = sum_dir(c->images_fd) + sum_dir(c->snaps_fd);
	reserved = 0;
	char p[24], m[24];
	snprintf(p, sizeof(p), "%llu", (unsigned long long)promised);
	snprintf(m, sizeof(m), "%llu", (unsigned long long)c->max_file_bytes);
	log_kv(LOG_LVL_INFO, "capacity", "promised_bytes", p, "largest_file_bytes", m, NULL);
}

static uint64_t limit(const struct mh_ctx *c)
{
	struct statvfs sv;
	if (fstatvfs(c->data_fd, &sv) < 0)
		return 0;
	uint64_t size = (uint64_t)sv.f_blocks * sv.f_frsize;
	return size / 100 * pol_overcommit_percent(c->pol);
}

uint64_t mh_space_available(const struct mh_ctx *c)
{
	struct statvfs sv;
	uint64_t lim = limit(c), used = promised + reserved;
	uint64_t left = lim > used ? lim - used : 0;
	/* Never more than is free on disk either: other files share the file system. */
	if (fstatvfs(c->data_fd, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < left)
		left = (uint64_t)sv.f_bavail * sv.f_frsize;
	return left;
}

static uint64_t max_size(const struct mh_ctx *c)
{
	uint64_t max = pol_max_volume_bytes(c->pol);
	return c->max_file_bytes && c->max_file_bytes < max ? c->max_file_bytes : max;
}

uint64_t mh_space_max_volume(const struct mh_ctx *c)
{
	return max_size(c);
}

int mh_space_size_ok(const struct mh_ctx *c, uint64_t size, uint64_t *out, struct mh_res *r)
{
	uint64_t min = pol_min_volume_bytes(c->pol), max = max_size(c);
	/* Bounds first (max <= 2^62, so rounding up to 4 KiB cannot overflow). */
	if (size < min || size > max)
		return mh_fail(r, MH_E_REFUSED, EINVAL,
		               "size %llu outside [%llu, %llu] (policy bounds and the largest file "
		               "the data directory takes)",
		               (unsigned long long)size, (unsigned long long)min,
		               (unsigned long long)max);
	*out = (size + 4095) & ~(uint64_t)4095;
	if (*out > max)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "size rounded to 4 KiB exceeds %llu",
		               (unsigned long long)max);
	return 0;
}

static uint64_t size_of(int dir, const char *name)
{
	struct stat st;
	return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)
	           ? (uint64_t)st.st_size
	           : 0;
}

/* The size of images/<id>.img, the source of a snapshot (0 for an id that is not one). */
static uint64_t source_size(const struct mh_ctx *c, const char *volume_id)
{
	char src[64];
	if (!pol_volume_id_valid(volume_id))
		return 0;
	snprintf(src, sizeof(src), "%.40s.img", volume_id);
	return size_of(c->images_fd, src);
}

/* One more file of h (<id>.img), to grow to want bytes; its growth added to *grow. */
static void claim(struct mh_space_hold *h, const char *id, uint64_t want, uint64_t *grow)
{
	snprintf(h->name[h->n], sizeof(h->name[h->n]), "%.40s.img", id);
	h->before[h->n] = size_of(h->dir, h->name[h->n]);
	want = (want + 4095) & ~(uint64_t)4095;
	*grow += want > h->before[h->n] ? want - h->before[h->n] : 0;
	h->n++;
}

/* Every member of a group whose ids are ids (the worker refuses the rest). */
static void claim_group(const struct mh_ctx *c, const struct mh_req_group *q,
                        struct mh_space_hold *h, uint64_t *grow)
{
	h->dir = c->snaps_fd;
	for (size_t i = 0; i < q->n && i < MH_GROUP_MAX; i++) {
		uint64_t want = source_size(c, q->volume_id[i]);
		if (pol_snapshot_id_valid(q->snapshot_id[i]) && want <= max_size(c))
			claim(h, q->snapshot_id[i], want, grow);
	}
}

int mh_space_reserve(const struct mh_ctx *c, const struct mh_msg *req, struct mh_space_hold *h,
                     char *why, size_t whylen)
{
	const char *id = NULL;
	uint64_t want = 0, grow = 0;
	h->dir = -1;
	h->n = 0;
	h->reserved = 0;
	switch (req->type) {
	case MH_REQ_CREATE:
		id = req->u.create.volume_id;
		want = req->u.create.size_bytes;
		break;
	case MH_REQ_RESIZE:
		id = req->u.resize.volume_id;
		want = req->u.resize.size_bytes;
		break;
	case MH_REQ_CLONE:
		id = req->u.clone.volume_id;
		want = req->u.clone.size_bytes;
		break;
	case MH_REQ_DELETE:
		id = req->u.del.volume_id;
		break;
	case MH_REQ_SNAPSHOT:
		id = req->u.snapshot.snapshot_id;
		want = source_size(c, req->u.snapshot.volume_id);
		break;
	case MH_REQ_GROUP_SNAPSHOT:
		claim_group(c, &req->u.group, h, &grow);
		break;
	case MH_REQ_DELETE_SNAPSHOT:
		id = req->u.del_snapshot.snapshot_id;
		break;
	default:
		return 0;
	}
	/* An id that is not one, or a size out of bounds: the worker refuses it, no claim. */
	if (id && (pol_volume_id_valid(id) || pol_snapshot_id_valid(id)) && want <= max_size(c)) {
		h->dir = pol_snapshot_id_valid(id) ? c->snaps_fd : c->images_fd;
		claim(h, id, want, &grow);
	}
	if (h->n == 0) {
		h->dir = -1;
		return 0;
	}
	uint64_t lim = limit(c), used = promised + reserved;
	if (grow && used + grow > lim) {
		snprintf(why, whylen,
		         "not enough space: %llu bytes promised of the %llu the data directory "
		         "may promise (its size times overcommit_ratio), %llu more asked",
		         (unsigned long long)used, (unsigned long long)lim,
		         (unsigned long long)grow);
		h->dir = -1;
		return -1;
	}
	h->reserved = grow;
	reserved += grow;
	return 0;
}

void mh_space_settle(struct mh_space_hold *h)
{
	if (h->dir < 0)
		return;
	for (size_t i = 0; i < h->n; i++) {
		uint64_t after = size_of(h->dir, h->name[i]);
		promised = promised + after >= h->before[i] ? promised + after - h->before[i] : 0;
	}
	reserved -= h->reserved;
	h->dir = -1;
}
