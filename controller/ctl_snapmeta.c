/*
 * The SnapshotMetadata service: GetMetadataAllocated and GetMetadataDelta,
 * server-streaming. Runs in rpcd, unprivileged.
 *
 * Both are computed from snapshot images, never from a volume in use: the
 * helper's BLOCKS request reads one page of ranges (MH_BLOCKS_MAX at most)
 * through its capability-less tools runner, and rpcd streams each page as it
 * comes, in messages of max_results ranges (a page's worth when 0), then asks
 * for the next page from where the last one stopped. Memory is one page
 * whatever the volume's size; rpcd never reads a volume's bytes.
 *
 * What is answered:
 *  - VARIABLE_LENGTH ranges of whole 4 KiB blocks (the last may end at the
 *    snapshot's end), ascending and disjoint across the whole stream;
 *    volume_capacity_bytes is the target snapshot's size;
 *  - allocated: the ranges of the snapshot's image that hold data, so what a
 *    file system or an application wrote (and what mkfs wrote), not what was
 *    never written or was discarded;
 *  - delta: every 4 KiB block whose bytes differ between the base and the
 *    target (what the volume's writes and discards changed between the two
 *    cuts); where the volume grew, the base reads as zeros beyond its end.
 *  - a stream with no range at all still sends one message, so the caller
 *    learns the capacity.
 *
 * Errors, as the spec's tables say: a missing id or a negative max_results
 * INVALID_ARGUMENT; an unknown snapshot NOT_FOUND; snapshots of different
 * volumes, a base cut after the target, or a directory volume's snapshot
 * (no blocks) INVALID_ARGUMENT; a starting_offset below 0 or past the
 * capacity OUT_OF_RANGE; a snapshot deleted while its stream runs ends it
 * with NOT_FOUND. The helper runs at most 4 page reads at once, as many as
 * rpcd's streamer threads ask for (rpcd/rpcd_server.c); a page it refuses
 * all the same is asked again for up to about 3 s before the stream fails
 * UNAVAILABLE (the caller may resume it from its last range).
 */
#include "ctl_int.h"
#include "mh_proto_all.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ctl_stream {
	struct ctl *c;
	bool delta;
	char target[MH_ID_MAX + 1], base[MH_ID_MAX + 1];
	uint64_t size;     /* the target's: every message's volume_capacity_bytes */
	uint64_t next;     /* where the next page starts */
	uint32_t per_msg;  /* ranges in one message */
	uint32_t sent;     /* ranges of page sent so far */
	unsigned messages; /* messages produced */
	struct mh_ans_blocks page;
};

/* The snapshot id in *out, or the spec's code. */
static int lookup(struct ctl *c, const char *id, const char *field, struct store_snapshot **out,
                  struct ctl_status *st)
{
	if (ctl_check_required(st, id, field))
		return st->code;
	int rc = pol_snapshot_id_valid(id) ? store_snapshot_get(c->st, id, out) : STORE_NOTFOUND;
	if (rc == STORE_NOTFOUND)
		return ctl_fail(st, CTL_NOT_FOUND, "%s %.80s does not exist", field, id);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "look up snapshot", rc);
	if ((*out)->dir_base && (*out)->dir_base[0])
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "%s %s is of a directory volume: it has no block metadata", field,
		                id);
	return CTL_OK;
}

static int start(struct ctl *c, const char *base_id, const char *target_id, int64_t offset,
                 int32_t max_results, struct ctl_stream **out, struct ctl_status *st)
{
	struct store_snapshot *t = NULL, *b = NULL;
	bool delta = base_id != NULL;
	*out = NULL;
	if (lookup(c, target_id, delta ? "target_snapshot_id" : "snapshot_id", &t, st) ||
	    (delta && lookup(c, base_id, "base_snapshot_id", &b, st)))
		goto done;
	if (!t || (delta && !b)) {
		ctl_fail(st, CTL_INTERNAL, "the store found no snapshot record");
	} else if (max_results < 0) {
		ctl_fail(st, CTL_INVALID_ARGUMENT, "max_results must not be negative");
	} else if (b && strcmp(b->source_volume_id, t->source_volume_id) != 0) {
		ctl_fail(st, CTL_INVALID_ARGUMENT,
		         "base snapshot %s is of volume %s, target snapshot %s of volume %s", b->id,
		         b->source_volume_id, t->id, t->source_volume_id);
	} else if (b && b->created_unix_ns > t->created_unix_ns) {
		ctl_fail(st, CTL_INVALID_ARGUMENT,
		         "base snapshot %s was cut after target snapshot %s", b->id, t->id);
	} else if (offset < 0 || offset > t->size_bytes) {
		ctl_fail(st, CTL_OUT_OF_RANGE,
		         "starting_offset %lld is outside the snapshot (0 to %lld)",
		         (long long)offset, (long long)t->size_bytes);
	} else {
		struct ctl_stream *s = calloc(1, sizeof(*s));
		if (!s)
			abort();
		*s = (struct ctl_stream){.c = c,
		                         .delta = delta,
		                         .size = (uint64_t)t->size_bytes,
		                         .next = (uint64_t)offset,
		                         .per_msg = max_results > 0 && max_results < MH_BLOCKS_MAX
		                                        ? (uint32_t)max_results
		                                        : MH_BLOCKS_MAX};
		snprintf(s->target, sizeof(s->target), "%s", t->id);
		snprintf(s->base, sizeof(s->base), "%s", delta ? b->id : "");
		*out = s;
		st->code = CTL_OK;
	}
done:
	store_snapshot_free(t);
	store_snapshot_free(b);
	return st->code;
}

int ctl_get_metadata_allocated(struct ctl *c, const void *r, struct ctl_stream **out,
                               struct ctl_status *st)
{
	const Csi__V1__GetMetadataAllocatedRequest *req = r;
	return start(c, NULL, req->snapshot_id, req->starting_offset, req->max_results, out, st);
}

int ctl_get_metadata_delta(struct ctl *c, const void *r, struct ctl_stream **out,
                           struct ctl_status *st)
{
	const Csi__V1__GetMetadataDeltaRequest *req = r;
	/* The base is named first in its messages: checked first, too. */
	if (ctl_check_required(st, req->base_snapshot_id, "base_snapshot_id"))
		return st->code;
	return start(c, req->base_snapshot_id, req->target_snapshot_id, req->starting_offset,
	             req->max_results, out, st);
}

/* The next page from the helper, into s->page. */
static int fetch(struct ctl_stream *s, struct ctl_status *st)
{
	struct mh_req_blocks q = {.what = s->delta ? MH_BLOCKS_DELTA : MH_BLOCKS_ALLOCATED,
	                          .offset = s->next};
	struct mh_err e;
	snprintf(q.snapshot_id, sizeof(q.snapshot_id), "%s", s->target);
	snprintf(q.base_id, sizeof(q.base_id), "%s", s->base);
	/* Every reader of the helper's taken (BUSY, EAGAIN): wait a little, up to ~3 s. */
	for (unsigned ms = 50;; ms *= 2) {
		if (mh_blocks(s->c->mh, &q, &s->page, &e) == 0)
			break;
		if (e.kind != MH_E_BUSY || e.sys_errno != EAGAIN || ms > 1600)
			return ctl_fail_mh(st, "snapshot metadata", &e);
		nanosleep(
		    &(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000},
		    NULL);
	}
	/* The helper checked the page's form; its end must move on, or the stream would not. */
	if (s->page.next <= s->next || s->page.next > s->size)
		return ctl_fail(st, CTL_INTERNAL,
		                "snapshot metadata: the helper's page does not move on");
	s->next = s->page.next;
	s->sent = 0;
	return CTL_OK;
}

int ctl_stream_next(struct ctl_stream *s, void **resp, struct ctl_arena *a, struct ctl_status *st)
{
	st->code = CTL_OK;
	while (s->sent == s->page.ranges.n) {
		if (s->next >= s->size) {
			if (s->messages > 0)
				return 0;
			break; /* one message, with no range: the capacity */
		}
		if (fetch(s, st) != CTL_OK)
			return -1;
		if (s->page.ranges.n == 0 && s->next < s->size)
			return 2; /* a page with no range: another turn, the caller's chance to stop
			           */
	}
	uint32_t n = s->page.ranges.n - s->sent;
	if (n > s->per_msg)
		n = s->per_msg;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
	Csi__V1__BlockMetadata **list = ctl_alloc(a, (n ? n : 1) * sizeof(*list));
	Csi__V1__BlockMetadata *items = ctl_alloc(a, (n ? n : 1) * sizeof(*items));
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t *v = s->page.ranges.v[s->sent + i];
		csi__v1__block_metadata__init(&items[i]);
		items[i].byte_offset = (int64_t)v[0];
		items[i].size_bytes = (int64_t)v[1];
		list[i] = &items[i];
	}
	s->sent += n;
	s->messages++;
	if (s->delta) {
		Csi__V1__GetMetadataDeltaResponse *m = ctl_alloc(a, sizeof(*m));
		csi__v1__get_metadata_delta_response__init(m);
		m->block_metadata_type = CSI__V1__BLOCK_METADATA_TYPE__VARIABLE_LENGTH;
		m->volume_capacity_bytes = (int64_t)s->size;
		m->n_block_metadata = n;
		m->block_metadata = list;
		*resp = m;
	} else {
		Csi__V1__GetMetadataAllocatedResponse *m = ctl_alloc(a, sizeof(*m));
		csi__v1__get_metadata_allocated_response__init(m);
		m->block_metadata_type = CSI__V1__BLOCK_METADATA_TYPE__VARIABLE_LENGTH;
		m->volume_capacity_bytes = (int64_t)s->size;
		m->n_block_metadata = n;
		m->block_metadata = list;
		*resp = m;
	}
	return 1;
}

void ctl_stream_free(struct ctl_stream *s)
{
	free(s);
}
