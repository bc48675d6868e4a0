/*
 * The flat JSON object reader of sepcsictl (see sctl_jsonline.h). Runs as the
 * operator. Every read stops at the string's NUL; a malformed line is
 * refused whole and leaves nothing allocated.
 */
#include "sctl_jsonline.h"

#include <stdlib.h>
#include <string.h>

static void skip_ws(const char **p)
{
	while (**p == ' ' || **p == '\t' || **p == '\r' || **p == '\n')
		(*p)++;
}

/* Appends the UTF-8 encoding of cp to out. */
static size_t put_utf8(char *out, unsigned cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* A JSON string at *p (on the opening quote), unescaped into a new string; NULL if malformed. */
static char *json_string(const char **p)
{
	const char *s = *p + 1;
	char *out = malloc(strlen(s) + 1); /* unescaping never grows a string */
	size_t o = 0;

	if (!out)
		abort();
	while (*s && *s != '"') {
		if (*s != '\\') {
			out[o++] = *s++;
			continue;
		}
		s++;
		unsigned cp, lo;
		switch (*s) {
		case '"':
		case '\\':
		case '/':
			out[o++] = *s;
			break;
		case 'b':
			out[o++] = '\b';
			break;
		case 'f':
			out[o++] = '\f';
			break;
		case 'n':
			out[o++] = '\n';
			break;
		case 'r':
			out[o++] = '\r';
			break;
		case 't':
			out[o++] = '\t';
			break;
		case 'u':
			if (hex4(s + 1, &cp) != 0 || cp == 0)
				goto bad; /* a NUL would cut the C string short */
			s += 4;
			if (cp >= 0xd800 && cp < 0xdc00 && s[1] == '\\' && s[2] == 'u' &&
			    hex4(s + 3, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				s += 6;
			}
			o += put_utf8(out + o, cp);
			break;
		default:
			goto bad;
		}
		s++;
	}
	if (*s != '"')
		goto bad;
	out[o] = '\0';
	*p = s + 1;
	return out;
bad:
	free(out);
	return NULL;
}

/* Any other JSON value at *p, as written: numbers, literals, nested objects and arrays. */
static char *json_raw(const char **p)
{
	const char *s = *p;
	int depth = 0;

	while (*s) {
		if (*s == '"') {
			const char *t = s;
			char *skip = json_string(&t);
			if (!skip)
				return NULL;
			free(skip);
			s = t;
			continue;
		}
		if (*s == '{' || *s == '[') {
			depth++;
		} else if (*s == '}' || *s == ']') {
			if (depth == 0)
				break;
			depth--;
		} else if (*s == ',' && depth == 0) {
			break;
		}
		s++;
	}
	if (depth != 0 || s == *p)
		return NULL;
	const char *e = s;
	while (e > *p && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	char *out = strndup(*p, (size_t)(e - *p));
	if (!out)
		abort();
	*p = s;
	return out;
}

/* One flat JSON object; -1 if the line is not one. */
int sctl_jsonline_parse(const char *s, struct sctl_jsonline *l)
{
	l->n = 0;
	skip_ws(&s);
	if (*s++ != '{')
		return -1;
	skip_ws(&s);
	if (*s == '}')
		return 0;
	for (;;) {
		skip_ws(&s);
		if (*s != '"' || l->n == SCTL_JSONLINE_KEYS)
			goto bad;
		struct sctl_kv *kv = &l->kv[l->n];
		kv->val = NULL; /* freed on failure below, before a value is read */
		kv->key = json_string(&s);
		if (!kv->key)
			goto bad;
		l->n++;
		skip_ws(&s);
		if (*s++ != ':')
			goto bad;
		skip_ws(&s);
		kv->quoted = *s == '"';
		kv->val = kv->quoted ? json_string(&s) : json_raw(&s);
		if (!kv->val)
			goto bad;
		skip_ws(&s);
		if (*s == ',') {
			s++;
			continue;
		}
		if (*s == '}')
			return 0;
		goto bad;
	}
bad:
	sctl_jsonline_free(l);
	return -1;
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
