/*
 * The JSON-lines reader of sepcsictl (see sctl_jsonline.h), on json-c's
 * strict tokener. Runs as the operator. A malformed line is refused whole and
 * leaves nothing allocated.
 *
 * json-c hides some things in the object it returns: a key given twice keeps
 * one value (the last), a key is cut at an escaped NUL, and some escaped
 * UTF-16 surrogate pairs come out as U+FFFD. So the text it accepted is
 * walked once more, strings skipped, to count its members and to find those
 * escapes; json-c's strict mode also takes 'single-quoted' strings, which
 * this walk refuses, as JSON does. Nesting deeper than json-c's limit (32) is
 * refused too.
 */
#include "sctl_jsonline.h"

#include <json.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define JSON_TEXT (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/*
 * Whether the escape e (after its backslash) is one json-c does not decode
 * faithfully: "\u0000", and the UTF-16 surrogates "\uD800".."\uDFFF", of
 * which json-c 0.16 turns some pairs into U+FFFD (\ud836\ude00, all of
 * U+1D800..U+1DFFF: json-c/json-c#893). The helper writes neither: it escapes
 * control characters only.
 */
static bool unfaithful(const char *e)
{
	return strncmp(e, "u0000", 5) == 0 ||
	       (e[0] == 'u' && (e[1] == 'd' || e[1] == 'D') && e[2] && strchr("89abAB", e[2]));
}

/*
 * The members of the object that is the text s (a colon at depth 1 each), or
 * -1 if a string in it holds an unfaithful escape or is single-quoted.
 */
static long count_members(const char *s)
{
	long n = 0;
	int depth = 0;
	bool in_string = false;

	for (; *s; s++) {
		if (in_string && *s == '\\') {
			if (unfaithful(s + 1))
				return -1;
			s++; /* the escaped character */
		} else if (*s == '"') {
			in_string = !in_string;
		} else if (in_string) {
			continue;
		} else if (*s == '\'') {
			return -1;
		} else if (*s == '{' || *s == '[') {
			depth++;
		} else if (*s == '}' || *s == ']') {
			depth--;
		} else if (*s == ':' && depth == 1) {
			n++;
		}
	}
	return n;
}

/* A copy of s, which json-c gives as NULL when it cannot allocate. */
static char *xstrdup(const char *s)
{
	char *p = s ? strdup(s) : NULL;

	if (!p)
		abort();
	return p;
}

/* One JSON object; -1 if the line is not one. */
int sctl_jsonline_parse(const char *s, struct sctl_jsonline *l)
{
	size_t len = strlen(s);
	struct json_tokener *tok = json_tokener_new();
	json_object *obj = NULL;

	l->n = 0;
	if (!tok)
		abort();
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT); /* nothing may follow but whitespace */
	if (len <= INT_MAX)
		obj = json_tokener_parse_ex(tok, s, (int)len);
	bool ok = obj && json_tokener_get_error(tok) == json_tokener_success &&
	          json_object_is_type(obj, json_type_object) &&
	          json_object_object_length(obj) <= SCTL_JSONLINE_KEYS &&
	          count_members(s) == json_object_object_length(obj);
	if (ok) {
		json_object_object_foreach(obj, key, val)
		{
			struct sctl_kv *kv = &l->kv[l->n++];
			kv->key = xstrdup(key);
			kv->quoted = json_object_is_type(val, json_type_string);
			kv->val =
			    xstrdup(kv->quoted ? json_object_get_string(val)
			                       : json_object_to_json_string_ext(val, JSON_TEXT));
		}
	}
	json_object_put(obj);
	json_tokener_free(tok);
	return ok ? 0 : -1;
}

const char *sctl_jsonline_get(const struct sctl_jsonline *l, const char *key)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->kv[i].key, key) == 0)
			return l->kv[i].val;
	return NULL;
}

void sctl_jsonline_free(struct sctl_jsonline *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->kv[i].key);
		free(l->kv[i].val);
	}
	l->n = 0;
}
