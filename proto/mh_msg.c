/*
 * The helper protocol codec (wire format in mh_proto.h). It runs in both ends
 * of the channel: in rpcd (unprivileged), which encodes requests and decodes
 * answers, and in sepcsi-mounthelper (privileged), which decodes requests from
 * a peer it does not trust. A decode failure in the helper is fatal to the
 * helper, so this file is the first thing between rpcd and root: every read is
 * bounded, every getter fails on short input and clears its output, and a
 * message is accepted only if every byte of it has been consumed by a field.
 *
 * Shape after OpenSSH's sshbuf: small put/get helpers over a bounded buffer;
 * then each payload defined once, as a list of its fields in wire order with
 * the values each may take, which the one encoder and the one decoder both
 * walk; then one table from message type to its payload.
 */
#include "mh_proto.h"

#include <stdbool.h>
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

/* s lives in an array of max + 1 bytes: strnlen never reads past it. */
static int put_str(struct wbuf *w, const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n > max || n > UINT16_MAX)
		return -1;
	if (put_be(w, n, 2) < 0)
		return -1;
	return put_bytes(w, s, n);
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

/* out has room for max + 1 bytes; on success it holds a NUL-free C string. */
static int get_str(struct rbuf *r, char *out, size_t max)
{
	uint64_t n;

	out[0] = '\0';
	if (get_be(r, &n, 2) < 0 || n > max || n > r->len - r->off)
		return -1;
	if (memchr(r->p + r->off, '\0', n) != NULL)
		return -1;
	memcpy(out, r->p + r->off, n);
	out[n] = '\0';
	r->off += n;
	return 0;
}

/*
 * A payload is a list of fields, in wire order, each read from or written to
 * its member of struct mh_msg (by offset):
 *   F_STR    a u16 length and that many bytes, at most hi, no NUL
 *   F_U8     one byte, a value in [lo, hi] (a flag is [0, 1]: 2 is not "true")
 *   F_FLAGS  one byte, no bit outside hi (MH_F_ALL): an unknown bit is a violation
 *   F_U32    four bytes, a value in [lo, hi]
 *   F_U64    eight bytes, any value
 * A value out of its range fails the encode as it fails the decode.
 */
enum field_kind { F_END, F_STR, F_U8, F_FLAGS, F_U32, F_U64 };

struct field {
	enum field_kind kind;
	uint32_t lo, hi;
	size_t off;
};

#define AT(m) offsetof(struct mh_msg, u.m)
#define STR(m, max)                                                                                \
	{                                                                                          \
		F_STR, 0, (max), AT(m)                                                             \
	}
#define U8(m, lo, hi)                                                                              \
	{                                                                                          \
		F_U8, (lo), (hi), AT(m)                                                            \
	}
#define BOOL(m) U8(m, 0, 1)
#define FLAGS(m)                                                                                   \
	{                                                                                          \
		F_FLAGS, 0, MH_F_ALL, AT(m)                                                        \
	}
#define U32(m, lo, hi)                                                                             \
	{                                                                                          \
		F_U32, (lo), (hi), AT(m)                                                           \
	}
#define U64(m)                                                                                     \
	{                                                                                          \
		F_U64, 0, 0, AT(m)                                                                 \
	}
#define END                                                                                        \
	{                                                                                          \
		F_END, 0, 0, 0                                                                     \
	}
#define SRC(m, lo) U8(m, (lo), MH_SRC_VOLUME)
/* Error kinds that may cross the wire: everything but OK and the client-only ones. */
#define ERR_KIND(m) U32(m, MH_E_REFUSED, MH_E_UNAVAILABLE - 1)

static const struct field f_create[] = {STR(create.volume_id, MH_ID_MAX), U64(create.size_bytes),
                                        END};
static const struct field f_delete[] = {STR(del.volume_id, MH_ID_MAX), END};
static const struct field f_freeze[] = {STR(freeze.volume_id, MH_ID_MAX),
                                        U32(freeze.seconds, 0, UINT32_MAX), END};
static const struct field f_stage[] = {STR(stage.volume_id, MH_ID_MAX),
                                       STR(stage.staging_path, MH_PATH_MAX),
                                       STR(stage.fs_type, MH_FSTYPE_MAX),
                                       STR(stage.mount_flags, MH_OPTS_MAX),
                                       STR(stage.mkfs_options, MH_OPTS_MAX),
                                       BOOL(stage.readonly),
                                       FLAGS(stage.flags),
                                       U32(stage.gid, 0, UINT32_MAX),
                                       END};
static const struct field f_unstage[] = {STR(unstage.volume_id, MH_ID_MAX),
                                         STR(unstage.staging_path, MH_PATH_MAX),
                                         FLAGS(unstage.flags), END};
static const struct field f_publish[] = {STR(publish.volume_id, MH_ID_MAX),
                                         STR(publish.staging_path, MH_PATH_MAX),
                                         STR(publish.target_path, MH_PATH_MAX),
                                         BOOL(publish.readonly),
                                         FLAGS(publish.flags),
                                         END};
static const struct field f_unpublish[] = {STR(unpublish.volume_id, MH_ID_MAX),
                                           STR(unpublish.target_path, MH_PATH_MAX), END};
static const struct field f_size_ans[] = {U64(size_ans.size_bytes), END};
static const struct field f_attached_ans[] = {U32(attached.devices, 0, UINT32_MAX), END};
static const struct field f_resize[] = {STR(resize.volume_id, MH_ID_MAX), U64(resize.size_bytes),
                                        END};
static const struct field f_snapshot[] = {STR(snapshot.snapshot_id, MH_ID_MAX),
                                          STR(snapshot.volume_id, MH_ID_MAX), END};
static const struct field f_snapshot_id[] = {STR(del_snapshot.snapshot_id, MH_ID_MAX), END};
static const struct field f_clone[] = {STR(clone.volume_id, MH_ID_MAX),
                                       SRC(clone.source_kind, MH_SRC_SNAPSHOT),
                                       STR(clone.source_id, MH_ID_MAX), U64(clone.size_bytes), END};
static const struct field f_copy_ans[] = {U64(copy_ans.size_bytes), BOOL(copy_ans.reflinked), END};
static const struct field f_capacity_ans[] = {
    U64(capacity_ans.available_bytes),  U64(capacity_ans.total_bytes),
    U64(capacity_ans.max_volume_bytes), BOOL(capacity_ans.reflink),
    BOOL(capacity_ans.quota),           END};
static const struct field f_expand[] = {
    STR(expand.volume_id, MH_ID_MAX), STR(expand.staging_path, MH_PATH_MAX),
    STR(expand.fs_type, MH_FSTYPE_MAX), FLAGS(expand.flags), END};
static const struct field f_stats[] = {STR(stats.volume_id, MH_ID_MAX),
                                       STR(stats.path, MH_PATH_MAX), FLAGS(stats.flags), END};
static const struct field f_stats_ans[] = {U64(stats_ans.bytes_total),
                                           U64(stats_ans.bytes_available),
                                           U64(stats_ans.bytes_used),
                                           U64(stats_ans.inodes_total),
                                           U64(stats_ans.inodes_free),
                                           U64(stats_ans.inodes_used),
                                           BOOL(stats_ans.abnormal),
                                           STR(stats_ans.message, MH_REASON_MAX),
                                           END};
static const struct field f_list[] = {U32(list.what, MH_LIST_IMAGES, MH_LIST_MOUNTS),
                                      STR(list.after, MH_ID_MAX), END};
static const struct field f_list_ans[] = {BOOL(list_ans.more), STR(list_ans.text, MH_LIST_TEXT_MAX),
                                          END};
static const struct field f_dir[] = {STR(dir.volume_id, MH_ID_MAX),
                                     STR(dir.base, MH_PATH_MAX),
                                     STR(dir.name, MH_DIRNAME_MAX),
                                     STR(dir.path, MH_PATH_MAX),
                                     STR(dir.snapshot_id, MH_ID_MAX),
                                     SRC(dir.source_kind, 0),
                                     STR(dir.source_id, MH_ID_MAX),
                                     STR(dir.source_name, MH_DIRNAME_MAX),
                                     U64(dir.size_bytes),
                                     U8(dir.mode, 0, MH_DIR_ARCHIVE),
                                     FLAGS(dir.flags),
                                     U32(dir.gid, 0, UINT32_MAX),
                                     END};
static const struct field f_dir_ans[] = {U64(dir_ans.size_bytes), BOOL(dir_ans.quota),
                                         BOOL(dir_ans.reflinked), END};
static const struct field f_error[] = {ERR_KIND(error.kind), U32(error.sys_errno, 0, UINT32_MAX),
                                       STR(error.reason, MH_REASON_MAX), END};

static size_t width(enum field_kind k)
{
	return k == F_U64 ? 8 : k == F_U32 ? 4 : 1;
}

static bool value_ok(const struct field *f, uint64_t v)
{
	if (f->kind == F_FLAGS)
		return (v & ~(uint64_t)f->hi) == 0;
	return f->kind == F_U64 || (v >= f->lo && v <= f->hi);
}

static int put_fields(struct wbuf *w, const struct field *f, const struct mh_msg *m)
{
	for (; f->kind != F_END; f++) {
		const char *p = (const char *)m + f->off;
		uint64_t v = 0;
		uint32_t v32;
		if (f->kind == F_STR) {
			if (put_str(w, p, f->hi) < 0)
				return -1;
			continue;
		}
		if (f->kind == F_U64) {
			memcpy(&v, p, sizeof(v));
		} else if (f->kind == F_U32) {
			memcpy(&v32, p, sizeof(v32));
			v = v32;
		} else {
			v = *(const uint8_t *)p;
		}
		if (!value_ok(f, v) || put_be(w, v, width(f->kind)) < 0)
			return -1;
	}
	return 0;
}

static int get_fields(struct rbuf *r, const struct field *f, struct mh_msg *m)
{
	for (; f->kind != F_END; f++) {
		char *p = (char *)m + f->off;
		uint64_t v;
		uint32_t v32;
		if (f->kind == F_STR) {
			if (get_str(r, p, f->hi) < 0)
				return -1;
			continue;
		}
		if (get_be(r, &v, width(f->kind)) < 0 || !value_ok(f, v))
			return -1;
		v32 = (uint32_t)v;
		if (f->kind == F_U64)
			memcpy(p, &v, sizeof(v));
		else if (f->kind == F_U32)
			memcpy(p, &v32, sizeof(v32));
		else
			*(uint8_t *)p = (uint8_t)v;
	}
	return 0;
}

/*
 * The closed set of message types. A type without a name is unknown; a NULL
 * field list means the message has no payload.
 */
struct codec {
	const char *name;
	const struct field *fields;
};

static const struct codec codecs[] = {
    [MH_REQ_PING] = {"REQ_PING", NULL},
    [MH_ANS_PING] = {"ANS_PING", NULL},
    [MH_REQ_CREATE] = {"REQ_CREATE", f_create},
    [MH_ANS_CREATE] = {"ANS_CREATE", f_size_ans},
    [MH_REQ_DELETE] = {"REQ_DELETE", f_delete},
    [MH_ANS_DELETE] = {"ANS_DELETE", NULL},
    [MH_REQ_STAGE] = {"REQ_STAGE", f_stage},
    [MH_ANS_STAGE] = {"ANS_STAGE", NULL},
    [MH_REQ_UNSTAGE] = {"REQ_UNSTAGE", f_unstage},
    [MH_ANS_UNSTAGE] = {"ANS_UNSTAGE", NULL},
    [MH_REQ_PUBLISH] = {"REQ_PUBLISH", f_publish},
    [MH_ANS_PUBLISH] = {"ANS_PUBLISH", NULL},
    [MH_REQ_UNPUBLISH] = {"REQ_UNPUBLISH", f_unpublish},
    [MH_ANS_UNPUBLISH] = {"ANS_UNPUBLISH", NULL},
    [MH_REQ_RESIZE] = {"REQ_RESIZE", f_resize},
    [MH_ANS_RESIZE] = {"ANS_RESIZE", f_size_ans},
    [MH_REQ_SNAPSHOT] = {"REQ_SNAPSHOT", f_snapshot},
    [MH_ANS_SNAPSHOT] = {"ANS_SNAPSHOT", f_copy_ans},
    [MH_REQ_DELETE_SNAPSHOT] = {"REQ_DELETE_SNAPSHOT", f_snapshot_id},
    [MH_ANS_DELETE_SNAPSHOT] = {"ANS_DELETE_SNAPSHOT", NULL},
    [MH_REQ_CLONE] = {"REQ_CLONE", f_clone},
    [MH_ANS_CLONE] = {"ANS_CLONE", f_copy_ans},
    [MH_REQ_CAPACITY] = {"REQ_CAPACITY", NULL},
    [MH_ANS_CAPACITY] = {"ANS_CAPACITY", f_capacity_ans},
    [MH_REQ_EXPAND] = {"REQ_EXPAND", f_expand},
    [MH_ANS_EXPAND] = {"ANS_EXPAND", f_size_ans},
    [MH_REQ_STATS] = {"REQ_STATS", f_stats},
    [MH_ANS_STATS] = {"ANS_STATS", f_stats_ans},
    [MH_REQ_LIST] = {"REQ_LIST", f_list},
    [MH_ANS_LIST] = {"ANS_LIST", f_list_ans},
    [MH_REQ_DIR_CREATE] = {"REQ_DIR_CREATE", f_dir},
    [MH_ANS_DIR_CREATE] = {"ANS_DIR_CREATE", f_dir_ans},
    [MH_REQ_DIR_DELETE] = {"REQ_DIR_DELETE", f_dir},
    [MH_ANS_DIR_DELETE] = {"ANS_DIR_DELETE", NULL},
    [MH_REQ_DIR_EXPAND] = {"REQ_DIR_EXPAND", f_dir},
    [MH_ANS_DIR_EXPAND] = {"ANS_DIR_EXPAND", f_dir_ans},
    [MH_REQ_DIR_PUBLISH] = {"REQ_DIR_PUBLISH", f_dir},
    [MH_ANS_DIR_PUBLISH] = {"ANS_DIR_PUBLISH", NULL},
    [MH_REQ_DIR_UNPUBLISH] = {"REQ_DIR_UNPUBLISH", f_dir},
    [MH_ANS_DIR_UNPUBLISH] = {"ANS_DIR_UNPUBLISH", NULL},
    [MH_REQ_DIR_STATS] = {"REQ_DIR_STATS", f_dir},
    [MH_ANS_DIR_STATS] = {"ANS_DIR_STATS", f_stats_ans},
    [MH_REQ_DIR_CAPACITY] = {"REQ_DIR_CAPACITY", f_dir},
    [MH_ANS_DIR_CAPACITY] = {"ANS_DIR_CAPACITY", f_capacity_ans},
    [MH_REQ_DIR_SNAPSHOT] = {"REQ_DIR_SNAPSHOT", f_dir},
    [MH_ANS_DIR_SNAPSHOT] = {"ANS_DIR_SNAPSHOT", f_copy_ans},
    [MH_REQ_DIR_DELETE_SNAPSHOT] = {"REQ_DIR_DELETE_SNAPSHOT", f_dir},
    [MH_ANS_DIR_DELETE_SNAPSHOT] = {"ANS_DIR_DELETE_SNAPSHOT", NULL},
    [MH_REQ_PURGE] = {"REQ_PURGE", f_dir},
    [MH_ANS_PURGE] = {"ANS_PURGE", NULL},
    [MH_REQ_FREEZE] = {"REQ_FREEZE", f_freeze},
    [MH_ANS_FREEZE] = {"ANS_FREEZE", NULL},
    [MH_REQ_THAW] = {"REQ_THAW", f_delete},
    [MH_ANS_THAW] = {"ANS_THAW", NULL},
    [MH_REQ_REFRESH] = {"REQ_REFRESH", f_delete},
    [MH_ANS_REFRESH] = {"ANS_REFRESH", f_size_ans},
    [MH_REQ_ATTACHED] = {"REQ_ATTACHED", f_delete},
    [MH_ANS_ATTACHED] = {"ANS_ATTACHED", f_attached_ans},
    [MH_REQ_STAGE_CHECK] = {"REQ_STAGE_CHECK", f_stage},
    [MH_ANS_STAGE_CHECK] = {"ANS_STAGE_CHECK", NULL},
    [MH_ANS_ERROR] = {"ANS_ERROR", f_error},
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
	if (put_be(&w, MH_PROTO_VERSION, 2) < 0 || put_be(&w, m->type, 2) < 0 ||
	    put_be(&w, m->id, 4) < 0 || put_be(&w, 0, 4) < 0)
		return -1;
	if (c->fields != NULL && put_fields(&w, c->fields, m) != 0)
		return -1;
	struct wbuf lenw = {out + 8, 4, 0};
	if (put_be(&lenw, w.off - MH_HDR_LEN, 4) < 0)
		return -1;
	*len = w.off;
	return 0;
}

int mh_msg_decode(const uint8_t *in, size_t len, struct mh_msg *m)
{
	struct rbuf r = {in, len, 0};
	const struct codec *c;
	uint64_t version, type, id, plen;

	memset(m, 0, sizeof(*m));
	if (len < MH_HDR_LEN || len > MH_MSG_MAX)
		goto fail;
	if (get_be(&r, &version, 2) < 0 || get_be(&r, &type, 2) < 0 || get_be(&r, &id, 4) < 0 ||
	    get_be(&r, &plen, 4) < 0)
		goto fail;
	if (version != MH_PROTO_VERSION || plen != len - MH_HDR_LEN)
		goto fail;
	if ((c = codec_for((uint16_t)type)) == NULL)
		goto fail;
	m->type = (uint16_t)type;
	m->id = (uint32_t)id;
	if (c->fields != NULL && get_fields(&r, c->fields, m) != 0)
		goto fail;
	if (r.off != r.len)
		goto fail; /* bytes left over */
	return 0;
fail:
	memset(m, 0, sizeof(*m));
	return -1;
}
