/*
 * The helper protocol codec (wire format in mh_proto.h). It runs in both ends
 * of the channel: in rpcd (unprivileged), which encodes requests and decodes
 * answers, and in sepcsi-mounthelper (privileged), which decodes requests from
 * a peer it does not trust. A decode failure in the helper is fatal to the
 * helper, so this file is the first thing between rpcd and root: every read is
 * bounded, every getter fails on short input and clears its output, and a
 * message is accepted only if every byte of it has been consumed by a field.
 *
 * Shape after OpenSSH's sshbuf: small put/get helpers over a bounded buffer,
 * then one table from message type to its payload's encode/decode pair.
 */
#include "mh_proto.h"

#include <string.h>

/* Writer: out[0..cap), off bytes used. After a failed put the buffer is abandoned. */
struct wbuf {
	uint8_t *p;
	size_t cap;
	size_t off;
};

/* Reader: in[0..len), off bytes consumed. */
struct rbuf {
	const uint8_t *p;
	size_t len;
	size_t off;
};

static int put_bytes(struct wbuf *w, const void *src, size_t n)
{
	if (n > w->cap - w->off)
		return -1;
	if (n > 0)
		memcpy(w->p + w->off, src, n);
	w->off += n;
	return 0;
}

static int put_be(struct wbuf *w, uint64_t v, size_t n)
{
	uint8_t b[8];

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	return put_bytes(w, b, n);
}

static int put_u16(struct wbuf *w, uint16_t v)
{
	return put_be(w, v, 2);
}

static int put_u32(struct wbuf *w, uint32_t v)
{
	return put_be(w, v, 4);
}

static int put_u64(struct wbuf *w, uint64_t v)
{
	return put_be(w, v, 8);
}

/* s lives in an array of max + 1 bytes: strnlen never reads past it. */
static int put_str(struct wbuf *w, const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n > max || n > UINT16_MAX)
		return -1;
	if (put_u16(w, (uint16_t)n) < 0)
		return -1;
	return put_bytes(w, s, n);
}

static int put_bool(struct wbuf *w, uint8_t v)
{
	return v > 1 ? -1 : put_be(w, v, 1);
}

/* A flag set: only the bits of MH_F_ALL may be set. */
static int put_flags(struct wbuf *w, uint8_t v)
{
	return (v & ~MH_F_ALL) != 0 ? -1 : put_be(w, v, 1);
}

/* A clone source: MH_SRC_SNAPSHOT or MH_SRC_VOLUME, nothing else. */
static int put_src(struct wbuf *w, uint8_t v)
{
	return v != MH_SRC_SNAPSHOT && v != MH_SRC_VOLUME ? -1 : put_be(w, v, 1);
}

static int get_be(struct rbuf *r, uint64_t *v, size_t n)
{
	*v = 0;
	if (n > r->len - r->off)
		return -1;
	for (size_t i = 0; i < n; i++)
		*v = (*v << 8) | r->p[r->off + i];
	r->off += n;
	return 0;
}

static int get_u16(struct rbuf *r, uint16_t *v)
{
	uint64_t x;
	int rc = get_be(r, &x, 2);

	*v = (uint16_t)x;
	return rc;
}

static int get_u32(struct rbuf *r, uint32_t *v)
{
	uint64_t x;
	int rc = get_be(r, &x, 4);

	*v = (uint32_t)x;
	return rc;
}

static int get_u64(struct rbuf *r, uint64_t *v)
{
	return get_be(r, v, 8);
}

/* out has room for max + 1 bytes; on success it holds a NUL-free C string. */
static int get_str(struct rbuf *r, char *out, size_t max)
{
	uint16_t n;

	out[0] = '\0';
	if (get_u16(r, &n) < 0 || n > max || n > r->len - r->off)
		return -1;
	if (memchr(r->p + r->off, '\0', n) != NULL)
		return -1;
	memcpy(out, r->p + r->off, n);
	out[n] = '\0';
	r->off += n;
	return 0;
}

/* A flag is exactly 0 or 1; anything else is a violation, not "true". */
static int get_bool(struct rbuf *r, uint8_t *v)
{
	uint64_t x;

	*v = 0;
	if (get_be(r, &x, 1) < 0 || x > 1)
		return -1;
	*v = (uint8_t)x;
	return 0;
}

/* Unknown flag bits are a violation, not something to ignore. */
static int get_flags(struct rbuf *r, uint8_t *v)
{
	uint64_t x;

	*v = 0;
	if (get_be(r, &x, 1) < 0 || (x & ~(uint64_t)MH_F_ALL) != 0)
		return -1;
	*v = (uint8_t)x;
	return 0;
}

static int get_src(struct rbuf *r, uint8_t *v)
{
	uint64_t x;

	*v = 0;
	if (get_be(r, &x, 1) < 0 || (x != MH_SRC_SNAPSHOT && x != MH_SRC_VOLUME))
		return -1;
	*v = (uint8_t)x;
	return 0;
}

/* Error kinds that may cross the wire: everything but OK and the client-only UNAVAILABLE. */
static int err_kind_ok(uint32_t kind)
{
	return kind > MH_E_OK && kind < MH_E_UNAVAILABLE;
}

/* Payload codecs, one pair per payload shape. Each returns 0 or -1. */

static int enc_create(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_req_create *q = &m->u.create;

	if (put_str(w, q->volume_id, MH_ID_MAX) < 0 || put_u64(w, q->size_bytes) < 0)
		return -1;
	return 0;
}

static int dec_create(struct rbuf *r, struct mh_msg *m)
{
	struct mh_req_create *q = &m->u.create;

	if (get_str(r, q->volume_id, MH_ID_MAX) < 0 || get_u64(r, &q->size_bytes) < 0)
		return -1;
	return 0;
}

static int enc_delete(struct wbuf *w, const struct mh_msg *m)
{
	return put_str(w, m->u.del.volume_id, MH_ID_MAX);
}

static int dec_delete(struct rbuf *r, struct mh_msg *m)
{
	return get_str(r, m->u.del.volume_id, MH_ID_MAX);
}

static int enc_stage(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_req_stage *q = &m->u.stage;

	if (put_str(w, q->volume_id, MH_ID_MAX) < 0 ||
	    put_str(w, q->staging_path, MH_PATH_MAX) < 0 ||
	    put_str(w, q->fs_type, MH_FSTYPE_MAX) < 0 ||
	    put_str(w, q->mount_flags, MH_OPTS_MAX) < 0 ||
	    put_str(w, q->mkfs_options, MH_OPTS_MAX) < 0 || put_bool(w, q->readonly) < 0 ||
	    put_flags(w, q->flags) < 0 || put_u32(w, q->gid) < 0)
		return -1;
	return 0;
}

static int dec_stage(struct rbuf *r, struct mh_msg *m)
{
	struct mh_req_stage *q = &m->u.stage;

	if (get_str(r, q->volume_id, MH_ID_MAX) < 0 ||
	    get_str(r, q->staging_path, MH_PATH_MAX) < 0 ||
	    get_str(r, q->fs_type, MH_FSTYPE_MAX) < 0 ||
	    get_str(r, q->mount_flags, MH_OPTS_MAX) < 0 ||
	    get_str(r, q->mkfs_options, MH_OPTS_MAX) < 0 || get_bool(r, &q->readonly) < 0 ||
	    get_flags(r, &q->flags) < 0 || get_u32(r, &q->gid) < 0)
		return -1;
	return 0;
}

static int enc_unstage(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_req_unstage *q = &m->u.unstage;

	if (put_str(w, q->volume_id, MH_ID_MAX) < 0 ||
	    put_str(w, q->staging_path, MH_PATH_MAX) < 0 || put_flags(w, q->flags) < 0)
		return -1;
	return 0;
}

static int dec_unstage(struct rbuf *r, struct mh_msg *m)
{
	struct mh_req_unstage *q = &m->u.unstage;

	if (get_str(r, q->volume_id, MH_ID_MAX) < 0 ||
	    get_str(r, q->staging_path, MH_PATH_MAX) < 0 || get_flags(r, &q->flags) < 0)
		return -1;
	return 0;
}

static int enc_publish(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_req_publish *q = &m->u.publish;

	if (put_str(w, q->volume_id, MH_ID_MAX) < 0 ||
	    put_str(w, q->staging_path, MH_PATH_MAX) < 0 ||
	    put_str(w, q->target_path, MH_PATH_MAX) < 0 || put_bool(w, q->readonly) < 0 ||
	    put_flags(w, q->flags) < 0)
		return -1;
	return 0;
}

static int dec_publish(struct rbuf *r, struct mh_msg *m)
{
	struct mh_req_publish *q = &m->u.publish;

	if (get_str(r, q->volume_id, MH_ID_MAX) < 0 ||
	    get_str(r, q->staging_path, MH_PATH_MAX) < 0 ||
	    get_str(r, q->target_path, MH_PATH_MAX) < 0 || get_bool(r, &q->readonly) < 0 ||
	    get_flags(r, &q->flags) < 0)
		return -1;
	return 0;
}

static int enc_unpublish(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_req_unpublish *q = &m->u.unpublish;

	if (put_str(w, q->volume_id, MH_ID_MAX) < 0 || put_str(w, q->target_path, MH_PATH_MAX) < 0)
		return -1;
	return 0;
}

static int dec_unpublish(struct rbuf *r, struct mh_msg *m)
{
	struct mh_req_unpublish *q = &m->u.unpublish;

	if (get_str(r, q->volume_id, MH_ID_MAX) < 0 || get_str(r, q->target_path, MH_PATH_MAX) < 0)
		return -1;
	return 0;
}

static int enc_size_ans(struct wbuf *w, const struct mh_msg *m)
{
	return put_u64(w, m->u.size_ans.size_bytes);
}

static int dec_size_ans(struct rbuf *r, struct mh_msg *m)
{
	return get_u64(r, &m->u.size_ans.size_bytes);
}

static int enc_resize(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_req_resize *q = &m->u.resize;

	if (put_str(w, q->volume_id, MH_ID_MAX) < 0 || put_u64(w, q->size_bytes) < 0)
		return -1;
	return 0;
}

static int dec_resize(struct rbuf *r, struct mh_msg *m)
{
	struct mh_req_resize *q = &m->u.resize;

	if (get_str(r, q->volume_id, MH_ID_MAX) < 0 || get_u64(r, &q->size_bytes) < 0)
		return -1;
	return 0;
}

static int enc_snapshot(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_req_snapshot *q = &m->u.snapshot;

	if (put_str(w, q->snapshot_id, MH_ID_MAX) < 0 || put_str(w, q->volume_id, MH_ID_MAX) < 0)
		return -1;
	return 0;
}

static int dec_snapshot(struct rbuf *r, struct mh_msg *m)
{
	struct mh_req_snapshot *q = &m->u.snapshot;

	if (get_str(r, q->snapshot_id, MH_ID_MAX) < 0 || get_str(r, q->volume_id, MH_ID_MAX) < 0)
		return -1;
	return 0;
}

static int enc_snapshot_id(struct wbuf *w, const struct mh_msg *m)
{
	return put_str(w, m->u.del_snapshot.snapshot_id, MH_ID_MAX);
}

static int dec_snapshot_id(struct rbuf *r, struct mh_msg *m)
{
	return get_str(r, m->u.del_snapshot.snapshot_id, MH_ID_MAX);
}

static int enc_clone(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_req_clone *q = &m->u.clone;

	if (put_str(w, q->volume_id, MH_ID_MAX) < 0 || put_src(w, q->source_kind) < 0 ||
	    put_str(w, q->source_id, MH_ID_MAX) < 0 || put_u64(w, q->size_bytes) < 0)
		return -1;
	return 0;
}

static int dec_clone(struct rbuf *r, struct mh_msg *m)
{
	struct mh_req_clone *q = &m->u.clone;

	if (get_str(r, q->volume_id, MH_ID_MAX) < 0 || get_src(r, &q->source_kind) < 0 ||
	    get_str(r, q->source_id, MH_ID_MAX) < 0 || get_u64(r, &q->size_bytes) < 0)
		return -1;
	return 0;
}

static int enc_copy_ans(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_ans_copy *a = &m->u.copy_ans;

	if (put_u64(w, a->size_bytes) < 0 || put_bool(w, a->reflinked) < 0)
		return -1;
	return 0;
}

static int dec_copy_ans(struct rbuf *r, struct mh_msg *m)
{
	struct mh_ans_copy *a = &m->u.copy_ans;

	if (get_u64(r, &a->size_bytes) < 0 || get_bool(r, &a->reflinked) < 0)
		return -1;
	return 0;
}

static int enc_capacity_ans(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_ans_capacity *a = &m->u.capacity_ans;

	if (put_u64(w, a->available_bytes) < 0 || put_u64(w, a->total_bytes) < 0 ||
	    put_u64(w, a->max_volume_bytes) < 0 || put_bool(w, a->reflink) < 0 ||
	    put_bool(w, a->quota) < 0)
		return -1;
	return 0;
}

static int dec_capacity_ans(struct rbuf *r, struct mh_msg *m)
{
	struct mh_ans_capacity *a = &m->u.capacity_ans;

	if (get_u64(r, &a->available_bytes) < 0 || get_u64(r, &a->total_bytes) < 0 ||
	    get_u64(r, &a->max_volume_bytes) < 0 || get_bool(r, &a->reflink) < 0 ||
	    get_bool(r, &a->quota) < 0)
		return -1;
	return 0;
}

static int enc_expand(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_req_expand *q = &m->u.expand;

	if (put_str(w, q->volume_id, MH_ID_MAX) < 0 ||
	    put_str(w, q->staging_path, MH_PATH_MAX) < 0 ||
	    put_str(w, q->fs_type, MH_FSTYPE_MAX) < 0 || put_flags(w, q->flags) < 0)
		return -1;
	return 0;
}

static int dec_expand(struct rbuf *r, struct mh_msg *m)
{
	struct mh_req_expand *q = &m->u.expand;

	if (get_str(r, q->volume_id, MH_ID_MAX) < 0 ||
	    get_str(r, q->staging_path, MH_PATH_MAX) < 0 ||
	    get_str(r, q->fs_type, MH_FSTYPE_MAX) < 0 || get_flags(r, &q->flags) < 0)
		return -1;
	return 0;
}

static int enc_stats(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_req_stats *q = &m->u.stats;

	if (put_str(w, q->volume_id, MH_ID_MAX) < 0 || put_str(w, q->path, MH_PATH_MAX) < 0 ||
	    put_flags(w, q->flags) < 0)
		return -1;
	return 0;
}

static int dec_stats(struct rbuf *r, struct mh_msg *m)
{
	struct mh_req_stats *q = &m->u.stats;

	if (get_str(r, q->volume_id, MH_ID_MAX) < 0 || get_str(r, q->path, MH_PATH_MAX) < 0 ||
	    get_flags(r, &q->flags) < 0)
		return -1;
	return 0;
}

static int enc_stats_ans(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_ans_stats *a = &m->u.stats_ans;

	if (put_u64(w, a->bytes_total) < 0 || put_u64(w, a->bytes_available) < 0 ||
	    put_u64(w, a->bytes_used) < 0 || put_u64(w, a->inodes_total) < 0 ||
	    put_u64(w, a->inodes_free) < 0 || put_u64(w, a->inodes_used) < 0 ||
	    put_bool(w, a->abnormal) < 0 || put_str(w, a->message, MH_REASON_MAX) < 0)
		return -1;
	return 0;
}

static int dec_stats_ans(struct rbuf *r, struct mh_msg *m)
{
	struct mh_ans_stats *a = &m->u.stats_ans;

	if (get_u64(r, &a->bytes_total) < 0 || get_u64(r, &a->bytes_available) < 0 ||
	    get_u64(r, &a->bytes_used) < 0 || get_u64(r, &a->inodes_total) < 0 ||
	    get_u64(r, &a->inodes_free) < 0 || get_u64(r, &a->inodes_used) < 0 ||
	    get_bool(r, &a->abnormal) < 0 || get_str(r, a->message, MH_REASON_MAX) < 0)
		return -1;
	return 0;
}

static int enc_list(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_req_list *q = &m->u.list;

	if (q->what < MH_LIST_IMAGES || q->what > MH_LIST_MOUNTS)
		return -1;
	return put_u32(w, q->what) < 0 || put_str(w, q->after, MH_ID_MAX) < 0 ? -1 : 0;
}

static int dec_list(struct rbuf *r, struct mh_msg *m)
{
	struct mh_req_list *q = &m->u.list;

	if (get_u32(r, &q->what) < 0 || get_str(r, q->after, MH_ID_MAX) < 0)
		return -1;
	return q->what < MH_LIST_IMAGES || q->what > MH_LIST_MOUNTS ? -1 : 0;
}

static int enc_list_ans(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_ans_list *a = &m->u.list_ans;

	return put_bool(w, a->more) < 0 || put_str(w, a->text, MH_LIST_TEXT_MAX) < 0 ? -1 : 0;
}

static int dec_list_ans(struct rbuf *r, struct mh_msg *m)
{
	struct mh_ans_list *a = &m->u.list_ans;

	return get_bool(r, &a->more) < 0 || get_str(r, a->text, MH_LIST_TEXT_MAX) < 0 ? -1 : 0;
}

/* A u8 of at most max (a directory request's source kind or mode). */
static int put_small(struct wbuf *w, uint8_t v, uint8_t max)
{
	return v > max ? -1 : put_be(w, v, 1);
}

static int get_small(struct rbuf *r, uint8_t *v, uint8_t max)
{
	uint64_t x;

	*v = 0;
	if (get_be(r, &x, 1) < 0 || x > max)
		return -1;
	*v = (uint8_t)x;
	return 0;
}

static int enc_dir(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_req_dir *q = &m->u.dir;

	if (put_str(w, q->volume_id, MH_ID_MAX) < 0 || put_str(w, q->base, MH_PATH_MAX) < 0 ||
	    put_str(w, q->name, MH_DIRNAME_MAX) < 0 || put_str(w, q->path, MH_PATH_MAX) < 0 ||
	    put_str(w, q->snapshot_id, MH_ID_MAX) < 0 ||
	    put_small(w, q->source_kind, MH_SRC_VOLUME) < 0 ||
	    put_str(w, q->source_id, MH_ID_MAX) < 0 ||
	    put_str(w, q->source_name, MH_DIRNAME_MAX) < 0 || put_u64(w, q->size_bytes) < 0 ||
	    put_small(w, q->mode, MH_DIR_ARCHIVE) < 0 || put_flags(w, q->flags) < 0 ||
	    put_u32(w, q->gid) < 0)
		return -1;
	return 0;
}

static int dec_dir(struct rbuf *r, struct mh_msg *m)
{
	struct mh_req_dir *q = &m->u.dir;

	if (get_str(r, q->volume_id, MH_ID_MAX) < 0 || get_str(r, q->base, MH_PATH_MAX) < 0 ||
	    get_str(r, q->name, MH_DIRNAME_MAX) < 0 || get_str(r, q->path, MH_PATH_MAX) < 0 ||
	    get_str(r, q->snapshot_id, MH_ID_MAX) < 0 ||
	    get_small(r, &q->source_kind, MH_SRC_VOLUME) < 0 ||
	    get_str(r, q->source_id, MH_ID_MAX) < 0 ||
	    get_str(r, q->source_name, MH_DIRNAME_MAX) < 0 || get_u64(r, &q->size_bytes) < 0 ||
	    get_small(r, &q->mode, MH_DIR_ARCHIVE) < 0 || get_flags(r, &q->flags) < 0 ||
	    get_u32(r, &q->gid) < 0)
		return -1;
	return 0;
}

static int enc_dir_ans(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_ans_dir *a = &m->u.dir_ans;

	if (put_u64(w, a->size_bytes) < 0 || put_bool(w, a->quota) < 0 ||
	    put_bool(w, a->reflinked) < 0)
		return -1;
	return 0;
}

static int dec_dir_ans(struct rbuf *r, struct mh_msg *m)
{
	struct mh_ans_dir *a = &m->u.dir_ans;

	if (get_u64(r, &a->size_bytes) < 0 || get_bool(r, &a->quota) < 0 ||
	    get_bool(r, &a->reflinked) < 0)
		return -1;
	return 0;
}

static int enc_error(struct wbuf *w, const struct mh_msg *m)
{
	const struct mh_ans_error *e = &m->u.error;

	if (!err_kind_ok(e->kind))
		return -1;
	if (put_u32(w, e->kind) < 0 || put_u32(w, e->sys_errno) < 0 ||
	    put_str(w, e->reason, MH_REASON_MAX) < 0)
		return -1;
	return 0;
}

static int dec_error(struct rbuf *r, struct mh_msg *m)
{
	struct mh_ans_error *e = &m->u.error;

	if (get_u32(r, &e->kind) < 0 || !err_kind_ok(e->kind))
		return -1;
	if (get_u32(r, &e->sys_errno) < 0 || get_str(r, e->reason, MH_REASON_MAX) < 0)
		return -1;
	return 0;
}

/*
 * The closed set of message types. A type without a name is unknown; a NULL
 * enc/dec pair means the message has no payload. Fields above are chained with
 * '||' so they are read in wire order and the first failure stops the rest.
 */
struct codec {
	const char *name;
	int (*enc)(struct wbuf *w, const struct mh_msg *m);
	int (*dec)(struct rbuf *r, struct mh_msg *m);
};

static const struct codec codecs[] = {
    [MH_REQ_PING] = {"REQ_PING", NULL, NULL},
    [MH_ANS_PING] = {"ANS_PING", NULL, NULL},
    [MH_REQ_CREATE] = {"REQ_CREATE", enc_create, dec_create},
    [MH_ANS_CREATE] = {"ANS_CREATE", enc_size_ans, dec_size_ans},
    [MH_REQ_DELETE] = {"REQ_DELETE", enc_delete, dec_delete},
    [MH_ANS_DELETE] = {"ANS_DELETE", NULL, NULL},
    [MH_REQ_STAGE] = {"REQ_STAGE", enc_stage, dec_stage},
    [MH_ANS_STAGE] = {"ANS_STAGE", NULL, NULL},
    [MH_REQ_UNSTAGE] = {"REQ_UNSTAGE", enc_unstage, dec_unstage},
    [MH_ANS_UNSTAGE] = {"ANS_UNSTAGE", NULL, NULL},
    [MH_REQ_PUBLISH] = {"REQ_PUBLISH", enc_publish, dec_publish},
    [MH_ANS_PUBLISH] = {"ANS_PUBLISH", NULL, NULL},
    [MH_REQ_UNPUBLISH] = {"REQ_UNPUBLISH", enc_unpublish, dec_unpublish},
    [MH_ANS_UNPUBLISH] = {"ANS_UNPUBLISH", NULL, NULL},
    [MH_REQ_RESIZE] = {"REQ_RESIZE", enc_resize, dec_resize},
    [MH_ANS_RESIZE] = {"ANS_RESIZE", enc_size_ans, dec_size_ans},
    [MH_REQ_SNAPSHOT] = {"REQ_SNAPSHOT", enc_snapshot, dec_snapshot},
    [MH_ANS_SNAPSHOT] = {"ANS_SNAPSHOT", enc_copy_ans, dec_copy_ans},
    [MH_REQ_DELETE_SNAPSHOT] = {"REQ_DELETE_SNAPSHOT", enc_snapshot_id, dec_snapshot_id},
    [MH_ANS_DELETE_SNAPSHOT] = {"ANS_DELETE_SNAPSHOT", NULL, NULL},
    [MH_REQ_CLONE] = {"REQ_CLONE", enc_clone, dec_clone},
    [MH_ANS_CLONE] = {"ANS_CLONE", enc_copy_ans, dec_copy_ans},
    [MH_REQ_CAPACITY] = {"REQ_CAPACITY", NULL, NULL},
    [MH_ANS_CAPACITY] = {"ANS_CAPACITY", enc_capacity_ans, dec_capacity_ans},
    [MH_REQ_EXPAND] = {"REQ_EXPAND", enc_expand, dec_expand},
    [MH_ANS_EXPAND] = {"ANS_EXPAND", enc_size_ans, dec_size_ans},
    [MH_REQ_STATS] = {"REQ_STATS", enc_stats, dec_stats},
    [MH_ANS_STATS] = {"ANS_STATS", enc_stats_ans, dec_stats_ans},
    [MH_REQ_LIST] = {"REQ_LIST", enc_list, dec_list},
    [MH_ANS_LIST] = {"ANS_LIST", enc_list_ans, dec_list_ans},
    [MH_REQ_DIR_CREATE] = {"REQ_DIR_CREATE", enc_dir, dec_dir},
    [MH_ANS_DIR_CREATE] = {"ANS_DIR_CREATE", enc_dir_ans, dec_dir_ans},
    [MH_REQ_DIR_DELETE] = {"REQ_DIR_DELETE", enc_dir, dec_dir},
    [MH_ANS_DIR_DELETE] = {"ANS_DIR_DELETE", NULL, NULL},
    [MH_REQ_DIR_EXPAND] = {"REQ_DIR_EXPAND", enc_dir, dec_dir},
    [MH_ANS_DIR_EXPAND] = {"ANS_DIR_EXPAND", enc_dir_ans, dec_dir_ans},
    [MH_REQ_DIR_PUBLISH] = {"REQ_DIR_PUBLISH", enc_dir, dec_dir},
    [MH_ANS_DIR_PUBLISH] = {"ANS_DIR_PUBLISH", NULL, NULL},
    [MH_REQ_DIR_UNPUBLISH] = {"REQ_DIR_UNPUBLISH", enc_dir, dec_dir},
    [MH_ANS_DIR_UNPUBLISH] = {"ANS_DIR_UNPUBLISH", NULL, NULL},
    [MH_REQ_DIR_STATS] = {"REQ_DIR_STATS", enc_dir, dec_dir},
    [MH_ANS_DIR_STATS] = {"ANS_DIR_STATS", enc_stats_ans, dec_stats_ans},
    [MH_REQ_DIR_CAPACITY] = {"REQ_DIR_CAPACITY", enc_dir, dec_dir},
    [MH_ANS_DIR_CAPACITY] = {"ANS_DIR_CAPACITY", enc_capacity_ans, dec_capacity_ans},
    [MH_REQ_DIR_SNAPSHOT] = {"REQ_DIR_SNAPSHOT", enc_dir, dec_dir},
    [MH_ANS_DIR_SNAPSHOT] = {"ANS_DIR_SNAPSHOT", enc_copy_ans, dec_copy_ans},
    [MH_REQ_DIR_DELETE_SNAPSHOT] = {"REQ_DIR_DELETE_SNAPSHOT", enc_dir, dec_dir},
    [MH_ANS_DIR_DELETE_SNAPSHOT] = {"ANS_DIR_DELETE_SNAPSHOT", NULL, NULL},
    [MH_ANS_ERROR] = {"ANS_ERROR", enc_error, dec_error},
};

static const struct codec *codec_for(uint16_t type)
{
	if (type >= sizeof(codecs) / sizeof(codecs[0]) || codecs[type].name == NULL)
		return NULL;
	return &codecs[type];
}

const char *mh_type_name(uint16_t type)
{
	const struct codec *c = codec_for(type);

	return c ? c->name : "UNKNOWN";
}

/* NOLINTNEXTLINE(readability-non-const-parameter): out is written through the wbuf below */
int mh_msg_encode(const struct mh_msg *m, uint8_t *out, size_t cap, size_t *len)
{
	const struct codec *c = codec_for(m->type);
	struct wbuf w = {out, cap < MH_MSG_MAX ? cap : MH_MSG_MAX, 0};

	*len = 0;
	if (c == NULL)
		return -1;
	/* The length field is written as 0 and patched once the payload is known. */
	if (put_u16(&w, MH_PROTO_VERSION) < 0 || put_u16(&w, m->type) < 0 ||
	    put_u32(&w, m->id) < 0 || put_u32(&w, 0) < 0)
		return -1;
	if (c->enc != NULL && c->enc(&w, m) != 0)
		return -1;
	struct wbuf lenw = {out + 8, 4, 0};
	if (put_u32(&lenw, (uint32_t)(w.off - MH_HDR_LEN)) < 0)
		return -1;
	*len = w.off;
	return 0;
}

int mh_msg_decode(const uint8_t *in, size_t len, struct mh_msg *m)
{
	struct rbuf r = {in, len, 0};
	const struct codec *c;
	uint16_t version, type;
	uint32_t id, plen;

	memset(m, 0, sizeof(*m));
	if (len < MH_HDR_LEN || len > MH_MSG_MAX)
		goto fail;
	if (get_u16(&r, &version) < 0 || get_u16(&r, &type) < 0 || get_u32(&r, &id) < 0 ||
	    get_u32(&r, &plen) < 0)
		goto fail;
	if (version != MH_PROTO_VERSION || plen != len - MH_HDR_LEN)
		goto fail;
	if ((c = codec_for(type)) == NULL)
		goto fail;
	m->type = type;
	m->id = id;
	if (c->dec != NULL && c->dec(&r, m) != 0)
		goto fail;
	if (r.off != r.len)
		goto fail; /* bytes left over */
	return 0;
fail:
	memset(m, 0, sizeof(*m));
	return -1;
}
