/*
 * One line of a JSON-lines file (the helper's audit log) read as one flat JSON
 * object: its keys, in order, each with its value unescaped (a JSON string) or
 * as written (numbers, literals, nested objects and arrays). Runs in
 * sepcsictl as the operator; the lines are read from a file it does not trust
 * to be well formed.
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
 * Parse s (one line, without its newline) into l. Returns 0, or -1 if s is
 * not one JSON object (l then holds nothing). Free with sctl_jsonline_free.
 */
int sctl_jsonline_parse(const char *s, struct sctl_jsonline *l);
void sctl_jsonline_free(struct sctl_jsonline *l);
/* The value of the first key named key, or NULL. */
const char *sctl_jsonline_get(const struct sctl_jsonline *l, const char *key);

#endif
