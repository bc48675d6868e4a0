/*
 * What the two codec files share (mh_msg.c, mh_msg_all.c): how a payload is
 * described, field by field, and how a set of message types is looked up.
 * Private to proto/.
 */
#ifndef SEPCSI_MH_CODEC_H
#define SEPCSI_MH_CODEC_H

#include <stdbool.h>
#include <stddef.h>

#include "mh_proto.h"

/*
 * A payload is a list of fields, in wire order, each read from or written to
 * its member of struct mh_msg (by offset):
 *   F_STR    a u16 length and that many bytes, at most hi, no NUL
 *   F_U8     one byte, a value in [lo, hi] (a flag is [0, 1]: 2 is not "true")
 *   F_FLAGS  one byte, no bit outside hi (MH_F_ALL): an unknown bit is a violation
 *   F_U32    four bytes, a value in [lo, hi]
 *   F_U64    eight bytes, any value
 *   F_RANGES a u32 count, at most hi, and that many pairs of u64 (struct mh_ranges,
 *            mh_proto_all.h): read and written by the set's own functions
 * A value out of its range fails the encode as it fails the decode.
 */
enum field_kind { F_END, F_STR, F_U8, F_FLAGS, F_U32, F_U64, F_RANGES };

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

/* An n-byte big-endian integer (mh_msg.c); -1 past the buffer's end. */
int codec_put_be(struct wbuf *w, uint64_t v, size_t n);
int codec_get_be(struct rbuf *r, uint64_t *v, size_t n);

struct field {
	enum field_kind kind;
	uint32_t lo, hi;
	size_t off;
};

#define AT(m) offsetof(struct mh_msg, u.m)
/* One field: its kind, its bounds, its member. */
#define FIELD(kind, lo, hi, off)                                                                   \
	{                                                                                          \
		(kind), (lo), (hi), (off)                                                          \
	}
#define STR(m, max)    FIELD(F_STR, 0, (max), AT(m))
#define U8(m, lo, hi)  FIELD(F_U8, (lo), (hi), AT(m))
#define BOOL(m)        U8(m, 0, 1)
#define FLAGS(m)       FIELD(F_FLAGS, 0, MH_F_ALL, AT(m))
#define U32(m, lo, hi) FIELD(F_U32, (lo), (hi), AT(m))
#define U64(m)         FIELD(F_U64, 0, 0, AT(m))
#define RANGES(m)      FIELD(F_RANGES, 0, MH_BLOCKS_MAX, AT(m))
#define END            FIELD(F_END, 0, 0, 0)
/* Error kinds that may cross the wire: everything but OK and the client-only ones. */
#define ERR_KIND(m) U32(m, MH_E_REFUSED, MH_E_UNAVAILABLE - 1)

/* Payloads of the core's types that other types share too (mh_msg.c). */
extern const struct field f_delete[], f_stage[], f_size_ans[], f_error[];

/* A message type: its name, and its payload's fields (NULL: none). */
struct codec {
	const char *name;
	const struct field *fields;
};

/*
 * A set of message types, by type (a type without a name is not in it), and
 * the set it extends, if any: mh_codecs_all extends mh_codecs_core. The
 * functions of the set a message is coded in read and write its ranges.
 */
struct mh_codecs {
	const struct codec *v;
	size_t n;
	const struct mh_codecs *base;
	/* F_RANGES at p, count within hi; NULL in a set whose types hold none. */
	int (*put_ranges)(struct wbuf *w, const void *p, uint32_t hi);
	int (*get_ranges)(struct rbuf *r, void *p, uint32_t hi);
};

/* The codec of type in set t or the sets it extends; NULL if none knows it (mh_msg.c). */
const struct codec *mh_codec_of(const struct mh_codecs *t, uint16_t type);

#endif
