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
 * Both printers recurse into nested messages. No CSI message contains itself,
 * directly or through others, so csi.proto bounds the depth.
 */
#include <inttypes.h>
#include <stdbool.h>
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

void sctl_json_string(FILE *o, const char *s)
{
	fputc('"', o);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", o);
			break;
		case '\\':
			fputs("\\\\", o);
			break;
		case '\n':
			fputs("\\n", o);
			break;
		case '\r':
			fputs("\\r", o);
			break;
		case '\t':
			fputs("\\t", o);
			break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				fprintf(o, "\\u%04x", *p);
			else
				fputc(*p, o);
		}
	}
	fputc('"', o);
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

/* One scalar at p (a field's storage or an array element) of field f. */
static void scalar(FILE *o, const ProtobufCFieldDescriptor *f, const void *p, bool json)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		fprintf(o, "%" PRId32, *(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		fprintf(o, "%" PRIu32, *(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64: {
		int64_t v = *(const int64_t *)p;
		fprintf(o, "%" PRId64, v);
		if (!json && v >= 1024 && is_size_field(f->name)) {
			char human[32];
			units_format_size(v, human, sizeof(human));
			fprintf(o, " (%s)", human);
		}
		break;
	}
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		fprintf(o, "%" PRIu64, *(const uint64_t *)p);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		fprintf(o, "%g", (double)*(const float *)p);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		fprintf(o, "%g", *(const double *)p);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		fputs(*(const protobuf_c_boolean *)p ? "true" : "false", o);
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		int v = *(const int *)p;
		const ProtobufCEnumValue *ev =
		    protobuf_c_enum_descriptor_get_value(f->descriptor, v);
		if (ev && json)
			sctl_json_string(o, ev->name);
		else if (ev)
			fputs(ev->name, o);
		else
			fprintf(o, "%d", v);
		break;
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(const char *const *)p;
		if (json)
			sctl_json_string(o, s ? s : "");
		else
			text_string(o, s ? s : "");
		break;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		fputs(json ? "\"" : "", o);
		for (size_t i = 0; i < b->len; i++)
			fprintf(o, "%02x", b->data[i]);
		fputs(json ? "\"" : "", o);
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		break; /* not a scalar */
	}
}

/* ---- JSON ---- */

static void json_msg(FILE *o, const ProtobufCMessage *m);

/* A message value: Timestamps and wrappers are shown by their value. */
/* NOLINTNEXTLINE(misc-no-recursion): csi.proto bounds the depth, see the top */
static void json_value_msg(FILE *o, const ProtobufCMessage *m)
{
	char ts[64];

	if (!m) {
		fputs("null", o);
	} else if (is_timestamp(m->descriptor)) {
		timestamp_string(m, ts, sizeof(ts));
		sctl_json_string(o, ts);
	} else if (is_wrapper(m->descriptor)) {
		const ProtobufCFieldDescriptor *vf = &m->descriptor->fields[0];
		scalar(o, vf, (const char *)m + vf->offset, true);
	} else {
		json_msg(o, m);
	}
}

/* NOLINTNEXTLINE(misc-no-recursion): csi.proto bounds the depth, see the top */
static void json_map(FILE *o, const ProtobufCFieldDescriptor *f, const ProtobufCMessage *const *e,
                     size_t n)
{
	fputc('{', o);
	for (size_t i = 0; i < n; i++) {
		const ProtobufCFieldDescriptor *kf = &e[i]->descriptor->fields[0];
		const ProtobufCFieldDescriptor *vf = &e[i]->descriptor->fields[1];
		fputs(i ? "," : "", o);
		sctl_json_string(o, *MEMBER(e[i], kf, char *));
		fputc(':', o);
		if (vf->type == PROTOBUF_C_TYPE_MESSAGE)
			json_value_msg(o, *MEMBER(e[i], vf, ProtobufCMessage *));
		else
			scalar(o, vf, (const char *)e[i] + vf->offset, true);
	}
	fputc('}', o);
	(void)f;
}

/* NOLINTNEXTLINE(misc-no-recursion): csi.proto bounds the depth, see the top */
static void json_msg(FILE *o, const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	bool first = true;

	fputc('{', o);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && *QUANT(m, f, uint32_t) != f->id)
			continue;
		if (strcmp(f->name, "secrets") == 0)
			continue;
		fputs(first ? "" : ",", o);
		first = false;
		sctl_json_string(o, f->name);
		fputc(':', o);
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *QUANT(m, f, size_t);
			const char *arr = *MEMBER(m, f, char *);
			if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor)) {
				json_map(o, f, (const ProtobufCMessage *const *)arr, n);
				continue;
			}
			fputc('[', o);
			for (size_t j = 0; j < n; j++) {
				fputs(j ? "," : "", o);
				if (f->type == PROTOBUF_C_TYPE_MESSAGE)
					json_value_msg(o,
					               ((const ProtobufCMessage *const *)arr)[j]);
				else
					scalar(o, f, arr + j * elem_size(f->type), true);
			}
			fputc(']', o);
		} else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
			json_value_msg(o, *MEMBER(m, f, ProtobufCMessage *));
		} else {
			scalar(o, f, (const char *)m + f->offset, true);
		}
	}
	fputc('}', o);
}

void sctl_print_json(FILE *o, const ProtobufCMessage *m)
{
	json_msg(o, m);
	fputc('\n', o);
}

/* ---- text ---- */

/* Whether f of m has anything to show in text. */
static bool text_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && *QUANT(m, f, uint32_t) != f->id)
		return false;
	if (strcmp(f->name, "secrets") == 0)
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
		scalar(o, vf, (const char *)m + vf->offset, false);
		if (vf->type == PROTOBUF_C_TYPE_INT64 && is_size_field(name)) {
			int64_t v = *MEMBER(m, vf, int64_t);
			if (v >= 1024) {
				char human[32];
				units_format_size(v, human, sizeof(human));
				fprintf(o, " (%s)", human);
			}
		}
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
			scalar(o, f, arr + j * elem_size(f->type), false);
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
				scalar(o, vf, (const char *)e + vf->offset, false);
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
			scalar(o, f, (const char *)m + f->offset, false);
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
