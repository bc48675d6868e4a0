/*
 * The helper protocol codec (wire format in mh_proto.h), with the message
 * types of the capable core (mh_msg_all.c has the others). It runs at each
 * end of both channels: in rpcd (unprivileged), which encodes requests and
 * decodes answers; in sepcsi-mounthelper, which decodes rpcd's requests and
 * asks the core; and in sepcsi-core, which links this file alone and decodes
 * its peer's requests with its own types only. A decode failure in the core
 * or the helper is fatal to it, so this file is the first thing between an
 * untrusted peer and a privileged process: every read is
 * bounded, every getter fails on short input and clears its output, and a
 * message is accepted only if every byte of it has been consumed by a field.
 *
 * Shape after OpenSSH's sshbuf: small put/get helpers over a bounded buffer;
 * then each payload defined once, as a list of its fields in wire order with
 * the values each may take, which the one encoder and the one decoder both
 * walk; then one table from message type to its payload (the core's here,
 * the rest in mh_msg_all.c, which falls back to this one).
 */
#include "mh_proto.h"

#include <string.h>

#include "mh_codec.h"

static int put_bytes(struct wbuf *w, const void *src, size_t n)
{
	if (n > w->cap - w->off)
		return -1;
	if (n > 0)
		memcpy(w->p + w->off, src, n);
	w->off += n;
	return 0;
}

int codec_put_be(struct wbuf *w, uint64_t v, size_t n)
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
	if (codec_put_be(w, n, 2) < 0)
		return -1;
	return put_bytes(w, s, n);
}

int codec_get_be(struct rbuf *r, uint64_t *v, size_t n)
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
	if (codec_get_be(r, &n, 2) < 0 || n > max || n > r->len - r->off)
		return -1;
	if (memchr(r->p + r->off, '\0', n) != NULL)
		return -1;
	memcpy(out, r->p + r->off, n);
	out[n] = '\0';
	r->off += n;
	return 0;
}

const struct field f_delete[] = {STR(del.volume_id, MH_ID_MAX), END};
static const struct field f_freeze[] = {STR(freeze.volume_id, MH_ID_MAX),
                                        U32(freeze.seconds, 0, UINT32_MAX), END};
const struct field f_stage[] = {STR(stage.volume_id, MH_ID_MAX),
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
const struct field f_size_ans[] = {U64(size_ans.size_bytes), END};
static const struct field f_attached_ans[] = {U32(attached.devices, 0, UINT32_MAX), END};
static const struct field f_expand[] = {
    STR(expand.volume_id, MH_ID_MAX), STR(expand.staging_path, MH_PATH_MAX),
    STR(expand.fs_type, MH_FSTYPE_MAX), FLAGS(expand.flags), END};
const struct field f_error[] = {ERR_KIND(error.kind), U32(error.sys_errno, 0, UINT32_MAX),
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

static int put_fields(struct wbuf *w, const struct mh_codecs *t, const struct field *f,
                      const struct mh_msg *m)
{
	for (; f->kind != F_END; f++) {
		const char *p = (const char *)m + f->off;
		uint64_t v = 0;
		uint32_t v32;
		if (f->kind == F_STR || f->kind == F_RANGES) {
			if ((f->kind == F_STR ? put_str(w, p, f->hi)
			     : !t->put_ranges ? -1
			                      : t->put_ranges(w, p, f->hi)) < 0)
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
		if (!value_ok(f, v) || codec_put_be(w, v, width(f->kind)) < 0)
			return -1;
	}
	return 0;
}

static int get_fields(struct rbuf *r, const struct mh_codecs *t, const struct field *f,
                      struct mh_msg *m)
{
	for (; f->kind != F_END; f++) {
		char *p = (char *)m + f->off;
		uint64_t v;
		uint32_t v32;
		if (f->kind == F_STR || f->kind == F_RANGES) {
			if ((f->kind == F_STR ? get_str(r, p, f->hi)
			     : !t->get_ranges ? -1
			                      : t->get_ranges(r, p, f->hi)) < 0)
				return -1;
			continue;
		}
		if (codec_get_be(r, &v, width(f->kind)) < 0 || !value_ok(f, v))
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
 * The capable core's types: those it serves and its answers (core/core_table.c);
 * not STATS and LIST, which sepcsi-reader serves (mh_msg_all.c).
 */
static const struct codec core_codecs[] = {
    [MH_REQ_PING] = {"REQ_PING", NULL},
    [MH_ANS_PING] = {"ANS_PING", NULL},
    [MH_REQ_STAGE] = {"REQ_STAGE", f_stage},
    [MH_ANS_STAGE] = {"ANS_STAGE", NULL},
    [MH_REQ_UNSTAGE] = {"REQ_UNSTAGE", f_unstage},
    [MH_ANS_UNSTAGE] = {"ANS_UNSTAGE", NULL},
    [MH_REQ_PUBLISH] = {"REQ_PUBLISH", f_publish},
    [MH_ANS_PUBLISH] = {"ANS_PUBLISH", NULL},
    [MH_REQ_UNPUBLISH] = {"REQ_UNPUBLISH", f_unpublish},
    [MH_ANS_UNPUBLISH] = {"ANS_UNPUBLISH", NULL},
    [MH_REQ_EXPAND] = {"REQ_EXPAND", f_expand},
    [MH_ANS_EXPAND] = {"ANS_EXPAND", f_size_ans},
    [MH_REQ_FREEZE] = {"REQ_FREEZE", f_freeze},
    [MH_ANS_FREEZE] = {"ANS_FREEZE", NULL},
    [MH_REQ_THAW] = {"REQ_THAW", f_delete},
    [MH_ANS_THAW] = {"ANS_THAW", NULL},
    [MH_REQ_REFRESH] = {"REQ_REFRESH", f_delete},
    [MH_ANS_REFRESH] = {"ANS_REFRESH", f_size_ans},
    [MH_REQ_ATTACHED] = {"REQ_ATTACHED", f_delete},
    [MH_ANS_ATTACHED] = {"ANS_ATTACHED", f_attached_ans},
    [MH_REQ_FLUSH] = {"REQ_FLUSH", f_delete},
    [MH_ANS_FLUSH] = {"ANS_FLUSH", NULL},
    [MH_ANS_ERROR] = {"ANS_ERROR", f_error},
};

const struct mh_codecs mh_codecs_core = {core_codecs, sizeof(core_codecs) / sizeof(core_codecs[0]),
                                         NULL, NULL, NULL};

const struct codec *mh_codec_of(const struct mh_codecs *t, uint16_t type)
{
	for (; t; t = t->base)
		if (type < t->n && t->v[type].name)
			return &t->v[type];
	return NULL;
}

/* NOLINTNEXTLINE(readability-non-const-parameter): out is written through the wbuf below */
int mh_msg_encode_in(const struct mh_codecs *t, const struct mh_msg *m, uint8_t *out, size_t cap,
                     size_t *len)
{
	const struct codec *c = mh_codec_of(t, m->type);
	struct wbuf w = {out, cap < MH_MSG_MAX ? cap : MH_MSG_MAX, 0};

	*len = 0;
	if (c == NULL)
		return -1;
	/* The length field is written as 0 and patched once the payload is known. */
	if (codec_put_be(&w, MH_PROTO_VERSION, 2) < 0 || codec_put_be(&w, m->type, 2) < 0 ||
	    codec_put_be(&w, m->id, 4) < 0 || codec_put_be(&w, 0, 4) < 0)
		return -1;
	if (c->fields != NULL && put_fields(&w, t, c->fields, m) != 0)
		return -1;
	struct wbuf lenw = {out + 8, 4, 0};
	if (codec_put_be(&lenw, w.off - MH_HDR_LEN, 4) < 0)
		return -1;
	*len = w.off;
	return 0;
}

int mh_msg_decode_in(const struct mh_codecs *t, const uint8_t *in, size_t len, struct mh_msg *m)
{
	struct rbuf r = {in, len, 0};
	const struct codec *c;
	uint64_t version, type, id, plen;

	memset(m, 0, sizeof(*m));
	if (len < MH_HDR_LEN || len > MH_MSG_MAX)
		goto fail;
	if (codec_get_be(&r, &version, 2) < 0 || codec_get_be(&r, &type, 2) < 0 ||
	    codec_get_be(&r, &id, 4) < 0 || codec_get_be(&r, &plen, 4) < 0)
		goto fail;
	if (version != MH_PROTO_VERSION || plen != len - MH_HDR_LEN)
		goto fail;
	if ((c = mh_codec_of(t, (uint16_t)type)) == NULL)
		goto fail;
	m->type = (uint16_t)type;
	m->id = (uint32_t)id;
	if (c->fields != NULL && get_fields(&r, t, c->fields, m) != 0)
		goto fail;
	if (r.off != r.len)
		goto fail; /* bytes left over */
	return 0;
fail:
	memset(m, 0, sizeof(*m));
	return -1;
}
