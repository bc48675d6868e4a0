/*
 * One line of a JSON-lines file (the helper's audit log) read as one JSON
 * object: its keys, in order, each with its value unescaped (a JSON string) or
 * as compact JSON text (numbers, literals, nested objects and arrays, as
 * json-c writes them: {"a":[1,2]}; within those, json-c keeps the last value
 * of a key given twice and clamps an integer to 64 bits). Runs in sepcsictl as
 * the operator; the lines are read from a file it does not trust to be well
 * formed.
 */
#ifndef SEPCSI_SCTL_JSONLINE_H
#define SEPCSI_SCTL_JSONLINE_H

#include <stdbool.h>
#include <stddef.h>

#define SCTL_JSONLINE_KEYS 64 /* a line with more keys is not parsed */

struct sctl_kv {
	char *key, *val; /* NUL-terminated, owned by the line */
	bool quoted;     /* val was a JSON string */
};

struct sctl_jsonline {
	struct sctl_kv kv[SCTL_JSONLINE_KEYS];
	size_t n;
};

/*
 * Parse s (one line, without its newline) into l. Returns 0, or -1 (l then
 * holds nothing) if s is not one JSON object with only whitespace after it,
 * if it has more than SCTL_JSONLINE_KEYS keys or a key given twice, or if any
 * string in it, key or value, holds a NUL ("\u0000") or an escaped UTF-16
 * surrogate ("\ud83d\ude00": json-c decodes some of them wrongly). Free with
 * sctl_jsonline_free.
 */
int sctl_jsonline_parse(const char *s, struct sctl_jsonline *l);
void sctl_jsonline_free(struct sctl_jsonline *l);
/* The value of the key named key, or NULL. */
const char *sctl_jsonline_get(const struct sctl_jsonline *l, const char *key);

#endif
