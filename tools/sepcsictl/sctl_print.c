/*
 * sepcsictl's printers: any protobuf-c message as indented "key: value" text
 * for people, or as one JSON object for programs, driven by the descriptors
 * alone. Runs as the operator; nothing privileged, nothing fatal.
 *
 * JSON keys are the proto field names, in field-number order, and every
 * field is always present: scalars with their value (default included),
 * strings, lists and maps possibly empty, an unset message as null; of a
 * oneof only the member that is set appears. int64 values are JSON numbers,
 * enums their names, Timestamps RFC 3339 strings in UTC, wrapper types
 * (BoolValue, Int64Value) their value or null. Text output leaves out empty
 * strings, lists and maps and unset messages, and adds a human size to byte
 * counts. A field named "secrets" is never printed.
 *
 * The JSON is a json-c tree, printed compact with "/" left as it is; a
 * scalar shows in text as its JSON text, unquoted.
 *
 * Both printers recurse into nested messages. No CSI message contains itself,
 * directly or through others, so csi.proto bounds the depth.
 */
#include <inttypes.h>
#include <json.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "csic.h"
#include "sctl.h"

#define MEMBER(m, f, type) ((const type *)((const char *)(m) + (f)->offset))
#define QUANT(m, f, type)  ((const type *)((const char *)(m) + (f)->quantifier_offset))

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool is_map_entry(const ProtobufCMessageDescriptor *d)
{
	return d->n_fields == 2 && strcmp(d->fields[0].name, "key") == 0 &&
	       strcmp(d->fields[1].name, "value") == 0 && ends_with(d->name, "Entry");
}

static bool is_timestamp(const ProtobufCMessageDescriptor *d)
{
	return strcmp(d->name, "google.protobuf.Timestamp") == 0;
}

static bool is_wrapper(const ProtobufCMessageDescriptor *d)
{
	return strncmp(d->name, "google.protobuf.", 16) == 0 && ends_with(d->name, "Value") &&
	       d->n_fields == 1 && strcmp(d->fields[0].name, "value") == 0;
}

/* A byte count, worth a human size in text: capacity_bytes, available_capacity, ... */
static bool is_size_field(const char *name)
{
	return ends_with(name, "_bytes") || ends_with(name, "_capacity") ||
	       ends_with(name, "_volume_size");
}

static size_t elem_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(ProtobufCMessage *);
	}
	return 0;
}

/* Whether f of m is printed at all: not a oneof member that is not set, not secrets. */
static bool shown(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && *QUANT(m, f, uint32_t) != f->id)
		return false;
	return strcmp(f->name, "secrets") != 0;
}

void sctl_format_time(int64_t seconds, int32_t nanos, char *buf, size_t len)
{
	time_t t = (time_t)seconds;
	struct tm tm;
	char base[32];

	if (!gmtime_r(&t, &tm) || strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
		snprintf(buf, len, "%" PRId64 "s", seconds);
		return;
	}
	if (nanos > 0)
		snprintf(buf, len, "%s.%09" PRId32 "Z", base, nanos);
	else
		snprintf(buf, len, "%sZ", base);
}

static void timestamp_string(const ProtobufCMessage *m, char *buf, size_t len)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const ProtobufCFieldDescriptor *fs =
	    protobuf_c_message_descriptor_get_field_by_name(d, "seconds");
	const ProtobufCFieldDescriptor *fn =
	    protobuf_c_message_descriptor_get_field_by_name(d, "nanos");

	sctl_format_time(*MEMBER(m, fs, int64_t), *MEMBER(m, fn, int32_t), buf, len);
}

/* s for a text line: control characters shown as \xNN, so one value stays on one line. */
static void text_string(FILE *o, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			fprintf(o, "\\x%02x", *p);
		else
			fputc(*p, o);
	}
}

/* ---- JSON ---- */

void sctl_json_print(FILE *o, struct json_object *j)
{
	const char *s = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN |
	                                                      JSON_C_TO_STRING_NOSLASHESCAPE);

	if (!s)
		abort(); /* json-c could not allocate */
	fputs(s, o);
	json_object_put(j);
}

struct json_object *sctl_json_hex(const uint8_t *b, size_t n)
{
	char *hex = malloc(2 * n + 1);

	if (!hex)
		abort();
	for (size_t i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", b[i]);
	hex[2 * n] = '\0';
	json_object *j = json_object_new_string(hex);
	free(hex);
	return j;
}

/* One scalar at p (a field's storage or an array element) of field f. */
static json_object *json_scalar(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		return json_object_new_int64(*(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return json_object_new_int64(*(const uint32_t *)p);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		return json_object_new_int64(*(const int64_t *)p);
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return json_object_new_uint64(*(const uint64_t *)p);
	case PROTOBUF_C_TYPE_FLOAT:
		return json_object_new_double((double)*(const float *)p);
	case PROTOBUF_C_TYPE_DOUBLE:
		return json_object_new_double(*(const double *)p);
	case PROTOBUF_C_TYPE_BOOL:
		return json_object_new_boolean(*(const protobuf_c_boolean *)p);
	case PROTOBUF_C_TYPE_ENUM: {
		int v = *(const int *)p;
		const ProtobufCEnumValue *ev =
		    protobuf_c_enum_descriptor_get_value(f->descriptor, v);
		return ev ? json_object_new_string(ev->name) : json_object_new_int(v);
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(const char *const *)p;
		return json_object_new_string(s ? s : "");
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		return sctl_json_hex(b->data, b->len);
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		break; /* not a scalar */
	}
	return NULL;
}

/*
 * The same scalar for text: its JSON text, unquoted, control characters as
 * \xNN, and a human size after a byte count (name is the field's, or that of
 * the field holding the wrapper).
 */
static void scalar(FILE *o, const ProtobufCFieldDescriptor *f, const void *p, const char *name)
{
	json_object *j = json_scalar(f, p);
	int64_t v = json_object_get_int64(j);

	text_string(o, json_object_get_string(j));
	if (json_object_is_type(j, json_type_int) && v >= 1024 && is_size_field(name)) {
		char human[32];
		units_format_size(v, human, sizeof(human));
		fprintf(o, " (%s)", human);
	}
	json_object_put(j);
}

static json_object *json_msg(const ProtobufCMessage *m);

/*
 * One value of field f at p (its storage, an array element or a map entry's
 * value): a scalar, or a message, null when unset, Timestamps and wrappers by
 * their value.
 */
/* NOLINTNEXTLINE(misc-no-recursion): csi.proto bounds the depth, see the top */
static json_object *json_value(const ProtobufCFieldDescriptor *f, const void *p)
{
	if (f->type != PROTOBUF_C_TYPE_MESSAGE)
		return json_scalar(f, p);
	const ProtobufCMessage *m = *(const ProtobufCMessage *const *)p;
	if (!m)
		return NULL;
	if (is_timestamp(m->descriptor)) {
		char ts[64];
		timestamp_string(m, ts, sizeof(ts));
		return json_object_new_string(ts);
	}
	if (is_wrapper(m->descriptor)) {
		const ProtobufCFieldDescriptor *vf = &m->descriptor->fields[0];
		return json_scalar(vf, (const char *)m + vf->offset);
	}
	return json_msg(m);
}

/* A repeated field: a list, or an object when it is a map. */
/* NOLINTNEXTLINE(misc-no-recursion): csi.proto bounds the depth, see the top */
static json_object *json_repeated(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	size_t n = *QUANT(m, f, size_t);
	const char *arr = *MEMBER(m, f, char *);

	if (f->type != PROTOBUF_C_TYPE_MESSAGE || !is_map_entry(f->descriptor)) {
		json_object *list = json_object_new_array();
		for (size_t j = 0; j < n; j++)
			json_object_array_add(list, json_value(f, arr + j * elem_size(f->type)));
		return list;
	}
	json_object *map = json_object_new_object();
	for (size_t j = 0; j < n; j++) {
		const ProtobufCMessage *e = ((const ProtobufCMessage *const *)arr)[j];
		const ProtobufCFieldDescriptor *kf = &e->descriptor->fields[0];
		const ProtobufCFieldDescriptor *vf = &e->descriptor->fields[1];
		json_object_object_add(map, *MEMBER(e, kf, char *),
		                       json_value(vf, (const char *)e + vf->offset));
	}
	return map;
}

/* NOLINTNEXTLINE(misc-no-recursion): csi.proto bounds the depth, see the top */
static json_object *json_msg(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	json_object *obj = json_object_new_object();

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (!shown(m, f))
			continue;
		json_object_object_add(obj, f->name,
		                       f->label == PROTOBUF_C_LABEL_REPEATED
		                           ? json_repeated(m, f)
		                           : json_value(f, (const char *)m + f->offset));
	}
	return obj;
}

void sctl_print_json(FILE *o, const ProtobufCMessage *m)
{
	sctl_json_print(o, json_msg(m));
	fputc('\n', o);
}

/* ---- text ---- */

/* Whether f of m has anything to show in text. */
static bool text_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	if (!shown(m, f))
		return false;
	if (f->label == PROTOBUF_C_LABEL_REPEATED)
		return *QUANT(m, f, size_t) > 0;
	if (f->type == PROTOBUF_C_TYPE_MESSAGE)
		return *MEMBER(m, f, ProtobufCMessage *) != NULL;
	if (f->type == PROTOBUF_C_TYPE_STRING) {
		const char *s = *MEMBER(m, f, char *);
		return s && *s;
	}
	return true;
}

static bool text_has_content(const ProtobufCMessage *m)
{
	for (unsigned i = 0; i < m->descriptor->n_fields; i++) {
		if (text_present(m, &m->descriptor->fields[i]))
			return true;
	}
	return false;
}

/*
 * Starts a line at indent; the first line of a list item (*dash) starts with
 * "- " two columns to the left instead.
 */
static void lead(FILE *o, int indent, bool *dash)
{
	if (*dash) {
		fprintf(o, "%*s- ", indent - 2, "");
		*dash = false;
	} else {
		fprintf(o, "%*s", indent, "");
	}
}

static void text_msg(FILE *o, const ProtobufCMessage *m, int indent, bool *dash);

/* A message that prints on one line (Timestamp, wrapper), or false. */
static bool text_inline_msg(FILE *o, const ProtobufCMessage *m, const char *name)
{
	if (is_timestamp(m->descriptor)) {
		char ts[64];
		timestamp_string(m, ts, sizeof(ts));
		fputs(ts, o);
		return true;
	}
	if (is_wrapper(m->descriptor)) {
		const ProtobufCFieldDescriptor *vf = &m->descriptor->fields[0];
		scalar(o, vf, (const char *)m + vf->offset, name);
		return true;
	}
	return false;
}

/* NOLINTNEXTLINE(misc-no-recursion): csi.proto bounds the depth, see the top */
static void text_repeated(FILE *o, const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                          int indent, bool *dash)
{
	size_t n = *QUANT(m, f, size_t);
	const char *arr = *MEMBER(m, f, char *);

	lead(o, indent, dash);
	fprintf(o, "%s:\n", f->name);
	for (size_t j = 0; j < n; j++) {
		if (f->type != PROTOBUF_C_TYPE_MESSAGE) {
			fprintf(o, "%*s- ", indent + 2, "");
			scalar(o, f, arr + j * elem_size(f->type), f->name);
			fputc('\n', o);
			continue;
		}
		const ProtobufCMessage *e = ((const ProtobufCMessage *const *)arr)[j];
		if (is_map_entry(f->descriptor)) {
			const ProtobufCFieldDescriptor *kf = &e->descriptor->fields[0];
			const ProtobufCFieldDescriptor *vf = &e->descriptor->fields[1];
			fprintf(o, "%*s", indent + 2, "");
			text_string(o, *MEMBER(e, kf, char *));
			fputs(": ", o);
			if (vf->type != PROTOBUF_C_TYPE_MESSAGE)
				scalar(o, vf, (const char *)e + vf->offset, vf->name);
			fputc('\n', o);
			continue;
		}
		if (text_has_content(e) && !is_timestamp(e->descriptor) &&
		    !is_wrapper(e->descriptor)) {
			bool item_dash = true; /* the item's first line carries the dash */
			text_msg(o, e, indent + 4, &item_dash);
			continue;
		}
		fprintf(o, "%*s- ", indent + 2, "");
		if (!text_inline_msg(o, e, f->name))
			fputs("{}", o);
		fputc('\n', o);
	}
}

/* NOLINTNEXTLINE(misc-no-recursion): csi.proto bounds the depth, see the top */
static void text_msg(FILE *o, const ProtobufCMessage *m, int indent, bool *dash)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (!text_present(m, f))
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			text_repeated(o, m, f, indent, dash);
			continue;
		}
		lead(o, indent, dash);
		fprintf(o, "%s:", f->name);
		if (f->type != PROTOBUF_C_TYPE_MESSAGE) {
			fputc(' ', o);
			scalar(o, f, (const char *)m + f->offset, f->name);
			fputc('\n', o);
			continue;
		}
		const ProtobufCMessage *sub = *MEMBER(m, f, ProtobufCMessage *);
		if (is_timestamp(sub->descriptor) || is_wrapper(sub->descriptor) ||
		    !text_has_content(sub)) {
			fputc(' ', o);
			if (!text_inline_msg(o, sub, f->name))
				fputs("{}", o);
			fputc('\n', o);
			continue;
		}
		fputc('\n', o);
		bool no = false;
		text_msg(o, sub, indent + 2, &no);
	}
}

void sctl_print_text(FILE *o, const ProtobufCMessage *m)
{
	bool no = false;

	text_msg(o, m, 0, &no);
}
