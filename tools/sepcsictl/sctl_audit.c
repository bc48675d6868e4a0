/*
 * `sepcsictl audit`: the audit log, one JSON object per line, in
 * <data-dir>/audit.log (appended by the capable core, or by a helper that
 * runs as root) and <data-dir>/helper-audit.log (by a helper under its own
 * uid beside its core), shown as one, in time order. Runs as the operator;
 * it opens the files read-only and never writes them.
 *
 * Lines are shown as they are with --output json, or as "key=value" text.
 * --volume keeps the lines whose volume_id is the given id; --follow keeps
 * reading as lines are appended (and starts over when the file is replaced
 * or truncated, as by log rotation). A line is only shown once it is
 * complete, so a line being written is never shown half. Each line is read
 * as one JSON object (sctl_jsonline.c); only the line being read is held, cut
 * at 64 KiB.
 */
#include <errno.h>
#include <json.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sctl.h"
#include "sctl_jsonline.h"

#define DEFAULT_DATA_DIR  "/var/lib/sepcsi/data"
#define AUDIT_FILE        "audit.log"
#define HELPER_AUDIT_FILE "helper-audit.log"
#define FOLLOW_POLL_MS    200

/* Keys shown first in text, in this order, when present. */
static const char *const lead_keys[] = {"time", "ts", "timestamp"};

static void audit_help(FILE *o)
{
	fprintf(o,
	        "usage: sepcsictl audit [--data-dir DIR] [--follow] [--volume ID] "
	        "[--output text|json]\n\n"
	        "The audit log, <data-dir>/audit.log and helper-audit.log in time order: one line\n"
	        "per action or refusal of the core and the helper, each written by the process\n"
	        "itself. No CSI socket needed.\n\n"
	        "flags:\n"
	        "  --data-dir DIR   the helper's --data-dir (default %s)\n"
	        "  --follow, -f     keep printing lines as they are appended\n"
	        "  --volume ID      only lines about this volume id\n"
	        "With --output json each line is printed as written (JSON lines).\n",
	        DEFAULT_DATA_DIR);
}

static bool is_lead_key(const char *k)
{
	for (size_t i = 0; i < sizeof(lead_keys) / sizeof(lead_keys[0]); i++)
		if (strcmp(k, lead_keys[i]) == 0)
			return true;
	return false;
}

/*
 * Text for a terminal: printable ASCII only. Anything else (a control byte,
 * DEL, any byte of a multi-byte character: C1 controls and bidirectional
 * marks among them) shows as '?', so that no line can move the cursor, erase
 * what is shown or reorder it. The audit log's ids, paths and reasons are
 * ASCII.
 */
static void put_clean(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		putchar(*p >= 0x20 && *p < 0x7f ? *p : '?');
}

/* A key or a value in text: as it is, or in double quotes when it has a space, '=' or '"'. */
static void put_text(const char *s, bool may_quote)
{
	if (!may_quote || (s[0] != '\0' && !strpbrk(s, " \t\"=\\"))) {
		put_clean(s);
		return;
	}
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			putchar('\\');
		putchar(*p >= 0x20 && *p < 0x7f ? *p : '?');
	}
	putchar('"');
}

static void text_value(const struct sctl_kv *kv)
{
	put_text(kv->val, kv->quoted); /* a number, literal or nested JSON: as written */
}

/* The file a line came from, when it is not audit.log: said first, in every form shown. */
#define FROM_HELPER "helper-audit.log"

static void print_text(const struct sctl_jsonline *l, bool helper)
{
	bool first = true;

	if (helper)
		fputs(FROM_HELPER ": ", stdout);
	for (size_t i = 0; i < sizeof(lead_keys) / sizeof(lead_keys[0]) && first; i++)
		for (size_t k = 0; k < l->n && first; k++)
			if (strcmp(l->kv[k].key, lead_keys[i]) == 0) {
				text_value(&l->kv[k]);
				first = false;
			}
	for (size_t i = 0; i < l->n; i++) {
		if (is_lead_key(l->kv[i].key))
			continue;
		fputs(first ? "" : " ", stdout);
		put_text(l->kv[i].key, true);
		putchar('=');
		text_value(&l->kv[i]);
		first = false;
	}
	putchar('\n');
}

/*
 * A line of the helper's in JSON: made again from what was read (never its
 * bytes as written; keys and strings in printable ASCII, as in text), with
 * "source" added last; a line that was not read, of
 * either file, as {"source": file, "unparsed": its printable text}. So every
 * line shown is one JSON object, and none of the helper's passes for the core's.
 */
/* A copy of s in printable ASCII, as put_clean shows it (the caller frees it). */
static char *clean_copy(const char *s)
{
	char *c = strdup(s);
	if (!c)
		abort();
	for (unsigned char *p = (unsigned char *)c; *p; p++)
		*p = *p >= 0x20 && *p < 0x7f ? *p : '?';
	return c;
}

static void print_json(const struct sctl_jsonline *l, const char *raw, bool helper)
{
	struct json_object *o = json_object_new_object();
	if (!o)
		abort();
	for (size_t i = 0; l && i < l->n; i++) {
		char *key = clean_copy(l->kv[i].key), *val = clean_copy(l->kv[i].val);
		struct json_object *v = l->kv[i].quoted ? NULL : json_tokener_parse(val);
		json_object_object_add(o, key, v ? v : json_object_new_string(val));
		free(key);
		free(val);
	}
	json_object_object_add(o, "source",
	                       json_object_new_string(helper ? FROM_HELPER : "audit.log"));
	if (!l) {
		char *clean = clean_copy(raw);
		json_object_object_add(o, "unparsed", json_object_new_string(clean));
		free(clean);
	}
	sctl_json_print(stdout, o);
	putchar('\n');
}

/*
 * Shows one complete line (without its newline); counts the ones that do not
 * parse. A line of helper-audit.log says so first ("helper-audit.log: " in
 * text, "source" in JSON), so that no line of the helper's passes for one of
 * the core's; one that names a source itself is not read.
 */
static void show(const char *raw, const char *volume, enum sctl_output out, size_t *bad,
                 bool helper)
{
	struct sctl_jsonline l;
	int parsed = sctl_jsonline_parse(raw, &l);

	if (parsed == 0 && helper && sctl_jsonline_get(&l, "source")) {
		sctl_jsonline_free(&l); /* a source of its own: not taken as written */
		parsed = -1;
	}
	if (parsed != 0) {
		(*bad)++;
		if (volume) /* unparsed lines cannot be matched against --volume */
			return;
		if (out == SCTL_OUT_JSON) {
			print_json(NULL, raw, helper);
			return;
		}
		fputs(helper ? FROM_HELPER ": " : "", stdout);
		put_clean(raw);
		putchar('\n');
		return;
	}
	const char *vid = sctl_jsonline_get(&l, "volume_id");
	if (!volume || (vid && strcmp(vid, volume) == 0)) {
		if (out == SCTL_OUT_JSON && helper)
			print_json(&l, raw, true);
		else if (out == SCTL_OUT_JSON)
			printf("%s\n", raw); /* the core's, as it wrote it */
		else
			print_text(&l, helper);
	}
	sctl_jsonline_free(&l);
}

static void sleep_ms(int ms)
{
	struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	nanosleep(&t, NULL);
}

/*
 * One audit file: audit.log (root's: the capable core's, or a helper's that
 * runs as root) and helper-audit.log (a helper's that runs under its own
 * uid beside its core). Read a line at a time: only the line being read is
 * held (at most AUDIT_LINE_MAX bytes of it; a longer one is shown cut, as a line that
 * does not parse), whatever the size of the file.
 */
#define NSOURCES       2
#define AUDIT_LINE_MAX ((size_t)64 * 1024)
struct source {
	const char *name;
	char path[4096];
	FILE *f;
	struct stat st0;
	char line[AUDIT_LINE_MAX + 1];
	size_t len;
	bool ready; /* line holds a whole line, not shown yet */
};

/* 0, or the errno of the open (ENOENT: not there, yet). */
static int source_open(struct source *s)
{
	s->len = 0;
	s->ready = false;
	s->f = fopen(s->path, "re");
	if (!s->f)
		return errno;
	fstat(fileno(s->f), &s->st0);
	return 0;
}

static void source_close(struct source *s)
{
	if (s->f)
		(void)fclose(s->f);
	s->f = NULL;
}

/*
 * Whether the next line is ready (read on from where the last one ended; a
 * line being written is kept as far as it came and completed later). last: a
 * last line without its newline counts too (no --follow).
 */
static bool source_next(struct source *s, bool last)
{
	while (s->f && !s->ready) {
		int ch = getc(s->f);
		if (ch == EOF) {
			clearerr(s->f);
			s->ready = last && s->len > 0;
			break;
		}
		if (ch == '\n')
			s->ready = true;
		else if (s->len < AUDIT_LINE_MAX) /* the rest of a line too long is dropped */
			s->line[s->len++] = (char)ch;
	}
	s->line[s->len] = '\0';
	return s->ready;
}

static void source_shown(struct source *s)
{
	s->len = 0;
	s->ready = false;
}

/* --follow: a file that appeared, was replaced or truncated (log rotation) starts over. */
static void source_check(struct source *s)
{
	struct stat st1;
	if (!s->f) {
		(void)source_open(s);
		return;
	}
	if (stat(s->path, &st1) == 0 &&
	    (st1.st_ino != s->st0.st_ino || st1.st_dev != s->st0.st_dev ||
	     st1.st_size < ftell(s->f))) {
		source_close(s);
		(void)source_open(s);
	}
}

/* The "ts" value of a line as written ("" if none): ISO 8601 in UTC, so it sorts as text. */
static const char *line_ts(const char *line, size_t *len)
{
	const char *t = strstr(line, "\"ts\"");
	*len = 0;
	if (!t)
		return "";
	for (t += 4; *t == ' ' || *t == ':'; t++)
		;
	const char *e = *t == '"' ? strchr(++t, '"') : NULL;
	if (!e)
		return "";
	*len = (size_t)(e - t);
	return t;
}

/*
 * Each file is in time order: both shown as one, oldest first, as far as they
 * are written now; a tie keeps audit.log's first.
 */
static void show_merged(struct source *src, bool last, const char *volume, enum sctl_output out,
                        size_t *bad)
{
	for (;;) {
		int pick = -1;
		const char *best = NULL;
		size_t blen = 0;
		for (int i = 0; i < NSOURCES; i++) {
			if (!source_next(&src[i], last))
				continue;
			size_t len;
			const char *ts = line_ts(src[i].line, &len);
			size_t m = len < blen ? len : blen;
			if (pick < 0 || memcmp(ts, best, m) < 0 ||
			    (memcmp(ts, best, m) == 0 && len < blen)) {
				pick = i;
				best = ts;
				blen = len;
			}
		}
		if (pick < 0)
			return;
		show(src[pick].line, volume, out, bad, pick == 1);
		source_shown(&src[pick]);
	}
}

int sctl_audit_main(int argc, char **argv, struct sctl_opts *o)
{
	enum { OPT_DATA_DIR = SCTL_OPT_OWN, OPT_VOLUME, OPT_FOLLOW = 'f' };
	static const struct option longopts[] = {
	    {"data-dir", required_argument, NULL, OPT_DATA_DIR},
	    {"volume", required_argument, NULL, OPT_VOLUME},
	    {"follow", no_argument, NULL, OPT_FOLLOW},
	    SCTL_COMMON_OPTIONS,
	};
	const char *data_dir = DEFAULT_DATA_DIR, *volume = NULL;
	bool follow = false;
	int c;

	optind = 0;
	while ((c = sctl_getopt(argc, argv, "-:fo:h", longopts, "audit: ", o, NULL)) != -1) {
		if (c == OPT_DATA_DIR) {
			data_dir = optarg;
		} else if (c == OPT_VOLUME) {
			volume = optarg;
		} else if (c == OPT_FOLLOW) {
			follow = true;
		} else if (c == SCTL_OPT_HELP) {
			audit_help(stdout);
			return SCTL_EXIT_OK;
		} else {
			return SCTL_EXIT_USAGE;
		}
	}

	static struct source src[NSOURCES] = {{.name = AUDIT_FILE}, {.name = HELPER_AUDIT_FILE}};
	size_t found = 0;
	for (size_t i = 0; i < NSOURCES; i++) {
		if (snprintf(src[i].path, sizeof(src[i].path), "%s/%s", data_dir, src[i].name) >=
		    (int)sizeof(src[i].path)) {
			fprintf(stderr, "sepcsictl: audit: --data-dir is too long\n");
			return SCTL_EXIT_USAGE;
		}
		int e = source_open(&src[i]);
		if (e && e != ENOENT) {
			fprintf(stderr, "sepcsictl: audit: cannot open %s: %s\n", src[i].path,
			        strerror(e));
			return SCTL_EXIT_FAILURE;
		}
		found += src[i].f != NULL;
	}
	if (!found) {
		fprintf(stderr,
		        "sepcsictl: audit: no audit log at %s: the helper writes "
		        "audit.log in its --data-dir; is --data-dir right, and does this "
		        "helper write one?\n",
		        src[0].path);
		return SCTL_EXIT_ABSENT;
	}
	size_t bad = 0;
	for (;;) {
		show_merged(src, !follow, volume, o->output, &bad);
		if (!follow)
			break;
		fflush(stdout);
		sleep_ms(FOLLOW_POLL_MS);
		for (size_t i = 0; i < NSOURCES; i++)
			source_check(&src[i]);
	}
	for (size_t i = 0; i < NSOURCES; i++)
		source_close(&src[i]);
	if (bad)
		fprintf(stderr, "sepcsictl: audit: %zu line(s) were not JSON objects\n", bad);
	return SCTL_EXIT_OK;
}
