/*
 * sepcsictl's reader of the helper's audit log (tools/sepcsictl/
 * sctl_jsonline.c, on json-c): one line, read as one JSON object. The input
 * is the line (up to its first NUL, as getline() and the parser see it).
 * Checks:
 *  - a refused line leaves no key behind and nothing allocated (LSan), and
 *    frees nothing it did not allocate (the output starts as garbage);
 *  - a line read is read whole: its members, walked here independently in
 *    the text, are the keys read, in order, each once (a key given twice is
 *    refused, not kept once), and nothing but the closing brace follows them;
 *  - every string value (and key) holds exactly the bytes its JSON escapes
 *    stand for: its length equals the length counted here independently, so
 *    no escape can hide or add bytes (a "\u0000" cannot cut a volume id);
 *  - what was read can be written back as JSON that reads back the same
 *    (keys, values, which values were strings), and writing that again gives
 *    the same bytes: the reader and a writer agree.
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "sctl_jsonline.h"

/*
 * Bytes the JSON string at s (on its opening quote) unescapes to, counted
 * without building it; -1 if it is not a well-formed string. UTF-16 surrogate
 * pairs become one 4-byte sequence, any other \u escape 1 to 3 bytes.
 */
static long json_string_len(const char *s)
{
	long n = 0;
	for (s++; *s && *s != '"'; s++) {
		if (*s != '\\') {
			n++;
			continue;
		}
		s++;
		if (strchr("\"\\/bfnrt", *s) && *s) {
			n++;
			continue;
		}
		if (*s != 'u' || strspn(s + 1, "0123456789abcdefABCDEF") < 4)
			return -1;
		unsigned cp = (unsigned)strtoul((char[5]){s[1], s[2], s[3], s[4], 0}, NULL, 16);
		s += 4;
		if (cp >= 0xd800 && cp < 0xdc00 && s[1] == '\\' && s[2] == 'u' &&
		    strspn(s + 3, "0123456789abcdefABCDEF") >= 4) {
			unsigned lo =
			    (unsigned)strtoul((char[5]){s[3], s[4], s[5], s[6], 0}, NULL, 16);
			if (lo >= 0xdc00 && lo < 0xe000) {
				n += 4;
				s += 6;
				continue;
			}
		}
		n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
	}
	return *s == '"' ? n : -1;
}

/*
 * Each quoted token of the line, in order, must match the next string read
 * (key or value), and the object must end after the last member read.
 */
static void check_text(const char *line, const struct sctl_jsonline *l)
{
	const char *s = strchr(line, '{');
	FUZZ_CHECK(s != NULL);
	s++;
	for (size_t i = 0; i < l->n; i++) {
		FUZZ_CHECK(sctl_jsonline_get(l, l->kv[i].key) == l->kv[i].val); /* each key once */
		for (int part = 0; part < 2; part++) {
			const char *v = part == 0 ? l->kv[i].key : l->kv[i].val;
			if (part == 1 && !l->kv[i].quoted) {
				/* A raw value: skip over it, strings inside it included. */
				s = strchr(s, ':') + 1;
				for (int depth = 0; *s; s++) {
					if (*s == '"') {
						long n = json_string_len(s);
						FUZZ_CHECK(n >= 0);
						for (s++; *s != '"'; s++)
							s += *s == '\\';
					} else if (*s == '{' || *s == '[') {
						depth++;
					} else if (*s == '}' || *s == ']') {
						if (depth-- == 0)
							break;
					} else if (*s == ',' && depth == 0) {
						break;
					}
				}
				continue;
			}
			s = strchr(s, '"');
			FUZZ_CHECK(s != NULL);
			long n = json_string_len(s);
			FUZZ_CHECK(n >= 0 && (size_t)n == strlen(v));
			for (s++; *s != '"'; s++)
				s += *s == '\\';
			s++;
		}
	}
	s += strspn(s, " \t\r\n");
	FUZZ_CHECK(*s == '}');
}

/* JSON string writer: quotes, backslashes and control bytes escaped, other bytes as they are. */
static void put_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static char *write_line(const struct sctl_jsonline *l)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		abort();
	fputc('{', f);
	for (size_t i = 0; i < l->n; i++) {
		if (i)
			fputc(',', f);
		put_string(f, l->kv[i].key);
		fputc(':', f);
		if (l->kv[i].quoted)
			put_string(f, l->kv[i].val);
		else
			fputs(l->kv[i].val, f);
	}
	fputc('}', f);
	if (fclose(f) != 0) /* the text is complete only once the stream is closed */
		abort();
	return out;
}

static void check_same(const struct sctl_jsonline *a, const struct sctl_jsonline *b)
{
	FUZZ_CHECK(a->n == b->n);
	for (size_t i = 0; i < a->n; i++) {
		FUZZ_CHECK(strcmp(a->kv[i].key, b->kv[i].key) == 0);
		FUZZ_CHECK(strcmp(a->kv[i].val, b->kv[i].val) == 0);
		FUZZ_CHECK(a->kv[i].quoted == b->kv[i].quoted);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *line = strndup((const char *)data, size);
	struct sctl_jsonline l, back;
	if (!line)
		abort();
	/* Garbage in the output first: the parser must not rely on what was there. */
	memset(&l, 0xa5, sizeof(l));
	memset(&back, 0xa5, sizeof(back));
	if (sctl_jsonline_parse(line, &l) != 0) {
		FUZZ_CHECK(l.n == 0);
		free(line);
		return 0;
	}
	FUZZ_CHECK(l.n <= SCTL_JSONLINE_KEYS);
	check_text(line, &l);

	char *again = write_line(&l);
	FUZZ_CHECK(sctl_jsonline_parse(again, &back) == 0);
	check_same(&l, &back);
	char *third = write_line(&back);
	FUZZ_CHECK(strcmp(again, third) == 0);
	sctl_jsonline_free(&back);
	sctl_jsonline_free(&l);
	free(third);
	free(again);
	free(line);
	return 0;
}
