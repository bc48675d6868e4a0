/*
 * `sepcsictl audit`: the privileged helper's audit log, <data-dir>/audit.log,
 * one JSON object per line, appended by the helper itself. Runs as the
 * operator; it opens the file read-only and never writes it.
 *
 * Lines are shown as they are with --output json, or as "key=value" text.
 * --volume keeps the lines whose volume_id is the given id; --follow keeps
 * reading as lines are appended (and starts over when the file is replaced
 * or truncated, as by log rotation). A line is only shown once it is
 * complete, so a line being written is never shown half. The parser here
 * reads one flat JSON object; nested values are shown as written.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sctl.h"

#define DEFAULT_DATA_DIR "/var/lib/sepcsi/data"
#define AUDIT_FILE       "audit.log"
#define MAX_KEYS         64
#define FOLLOW_POLL_MS   200

/* Keys shown first in text, in this order, when present. */
static const char *const lead_keys[] = {"time", "ts", "timestamp"};

struct kv {
	char *key, *val;
	bool quoted; /* val was a JSON string */
};

struct line {
	struct kv kv[MAX_KEYS];
	size_t n;
};

static void audit_help(FILE *o)
{
	fprintf(o,
	        "usage: sepcsictl audit [--data-dir DIR] [--follow] [--volume ID] "
	        "[--output text|json]\n\n"
	        "The privileged helper's audit log <data-dir>/audit.log: one line per privileged "
	        "action\nor refusal, written by the helper itself. No CSI socket needed.\n\n"
	        "flags:\n"
	        "  --data-dir DIR   the helper's --data-dir (default %s)\n"
	        "  --follow, -f     keep printing lines as they are appended\n"
	        "  --volume ID      only lines about this volume id\n"
	        "With --output json each line is printed as written (JSON lines).\n",
	        DEFAULT_DATA_DIR);
}

static void line_free(struct line *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->kv[i].key);
		free(l->kv[i].val);
	}
	l->n = 0;
}

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
			if (hex4(s + 1, &cp) != 0)
				goto bad;
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
static int parse_line(const char *s, struct line *l)
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
		if (*s != '"' || l->n == MAX_KEYS)
			goto bad;
		struct kv *kv = &l->kv[l->n];
		kv->key = json_string(&s);
		if (!kv->key)
			goto bad;
		kv->val = NULL; /* freed with the key if the line ends here */
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
	line_free(l);
	return -1;
}

static const char *line_get(const struct line *l, const char *key)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->kv[i].key, key) == 0)
			return l->kv[i].val;
	return NULL;
}

static bool is_lead_key(const char *k)
{
	for (size_t i = 0; i < sizeof(lead_keys) / sizeof(lead_keys[0]); i++)
		if (strcmp(k, lead_keys[i]) == 0)
			return true;
	return false;
}

static void text_value(const struct kv *kv)
{
	bool quote = kv->quoted && (kv->val[0] == '\0' || strpbrk(kv->val, " \t\"=") != NULL);

	if (quote)
		sctl_json_string(stdout, kv->val);
	else
		for (const unsigned char *p = (const unsigned char *)kv->val; *p; p++)
			putchar(*p < 0x20 ? '?' : *p);
}

static void print_text(const struct line *l)
{
	bool first = true;

	for (size_t i = 0; i < sizeof(lead_keys) / sizeof(lead_keys[0]); i++) {
		const char *v = line_get(l, lead_keys[i]);
		if (v) {
			printf("%s", v);
			first = false;
			break;
		}
	}
	for (size_t i = 0; i < l->n; i++) {
		if (is_lead_key(l->kv[i].key))
			continue;
		printf("%s%s=", first ? "" : " ", l->kv[i].key);
		text_value(&l->kv[i]);
		first = false;
	}
	putchar('\n');
}

/* Shows one complete line (without its newline); counts the ones that do not parse. */
static void show(const char *raw, const char *volume, enum sctl_output out, size_t *bad)
{
	struct line l;

	if (parse_line(raw, &l) != 0) {
		(*bad)++;
		if (!volume) /* unparsed lines cannot be matched against --volume */
			printf("%s\n", raw);
		return;
	}
	const char *vid = line_get(&l, "volume_id");
	if (!volume || (vid && strcmp(vid, volume) == 0)) {
		if (out == SCTL_OUT_JSON)
			printf("%s\n", raw);
		else
			print_text(&l);
	}
	line_free(&l);
}

static void sleep_ms(int ms)
{
	struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	nanosleep(&t, NULL);
}

int sctl_audit_main(int argc, char **argv, const struct sctl_opts *o)
{
	const char *data_dir = DEFAULT_DATA_DIR, *volume = NULL;
	bool follow = false;

	for (int i = 1; i < argc; i++) {
		const char *v;
		int r;
		if ((r = sctl_flag_value(argc, argv, &i, "--data-dir", &v)) != 0) {
			if (r < 0)
				return SCTL_EXIT_USAGE;
			data_dir = v;
		} else if ((r = sctl_flag_value(argc, argv, &i, "--volume", &v)) != 0) {
			if (r < 0)
				return SCTL_EXIT_USAGE;
			volume = v;
		} else if (strcmp(argv[i], "--follow") == 0 || strcmp(argv[i], "-f") == 0) {
			follow = true;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			audit_help(stdout);
			return SCTL_EXIT_OK;
		} else {
			fprintf(stderr, "sepcsictl: audit: unexpected argument '%s' (see --help)\n",
			        argv[i]);
			return SCTL_EXIT_USAGE;
		}
	}

	char path[4096];
	if (snprintf(path, sizeof(path), "%s/%s", data_dir, AUDIT_FILE) >= (int)sizeof(path)) {
		fprintf(stderr, "sepcsictl: audit: --data-dir is too long\n");
		return SCTL_EXIT_USAGE;
	}
	FILE *f = fopen(path, "re");
	if (!f) {
		int e = errno;
		if (e == ENOENT)
			fprintf(stderr,
			        "sepcsictl: audit: no audit log at %s: the helper writes "
			        "audit.log in its --data-dir; is --data-dir right, and does this "
			        "helper write one?\n",
			        path);
		else
			fprintf(stderr, "sepcsictl: audit: cannot open %s: %s\n", path,
			        strerror(e));
		return e == ENOENT ? SCTL_EXIT_ABSENT : SCTL_EXIT_FAILURE;
	}

	char *buf = NULL;
	size_t cap = 0, bad = 0;
	struct stat st0, st1;
	fstat(fileno(f), &st0);
	for (;;) {
		long pos = ftell(f);
		ssize_t n = getline(&buf, &cap, f);
		if (n > 0 && buf[n - 1] == '\n') {
			buf[n - 1] = '\0';
			show(buf, volume, o->output, &bad);
			continue;
		}
		if (n > 0 && !follow) { /* a last line without its newline yet */
			show(buf, volume, o->output, &bad);
			break;
		}
		if (!follow)
			break;
		/* A line being written: read it again whole, or stop if that cannot be done. */
		if (n > 0 && fseek(f, pos, SEEK_SET) != 0)
			break;
		fflush(stdout);
		sleep_ms(FOLLOW_POLL_MS);
		clearerr(f);
		if (stat(path, &st1) == 0 && (st1.st_ino != st0.st_ino ||
		                              st1.st_dev != st0.st_dev || st1.st_size < ftell(f))) {
			FILE *g = fopen(path, "re"); /* replaced or truncated: start over */
			if (g) {
				(void)fclose(f);
				f = g;
				fstat(fileno(f), &st0);
			}
		}
	}
	free(buf);
	(void)fclose(f);
	if (bad)
		fprintf(stderr, "sepcsictl: audit: %zu line(s) of %s were not JSON objects\n", bad,
		        path);
	return SCTL_EXIT_OK;
}
