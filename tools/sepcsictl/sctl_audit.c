/*
 * `sepcsictl audit`: the privileged helper's audit log, <data-dir>/audit.log,
 * one JSON object per line, appended by the helper itself. Runs as the
 * operator; it opens the file read-only and never writes it.
 *
 * Lines are shown as they are with --output json, or as "key=value" text.
 * --volume keeps the lines whose volume_id is the given id; --follow keeps
 * reading as lines are appended (and starts over when the file is replaced
 * or truncated, as by log rotation). A line is only shown once it is
 * complete, so a line being written is never shown half. Each line is read
 * as one JSON object (sctl_jsonline.c).
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

#define DEFAULT_DATA_DIR "/var/lib/sepcsi/data"
#define AUDIT_FILE       "audit.log"
#define FOLLOW_POLL_MS   200

/* Keys shown first in text, in this order, when present. */
static const char *const lead_keys[] = {"time", "ts", "timestamp"};

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

static bool is_lead_key(const char *k)
{
	for (size_t i = 0; i < sizeof(lead_keys) / sizeof(lead_keys[0]); i++)
		if (strcmp(k, lead_keys[i]) == 0)
			return true;
	return false;
}

static void text_value(const struct sctl_kv *kv)
{
	bool quote = kv->quoted && (kv->val[0] == '\0' || strpbrk(kv->val, " \t\"=") != NULL);

	if (quote)
		sctl_json_print(stdout, json_object_new_string(kv->val));
	else
		for (const unsigned char *p = (const unsigned char *)kv->val; *p; p++)
			putchar(*p < 0x20 ? '?' : *p);
}

static void print_text(const struct sctl_jsonline *l)
{
	bool first = true;

	for (size_t i = 0; i < sizeof(lead_keys) / sizeof(lead_keys[0]); i++) {
		const char *v = sctl_jsonline_get(l, lead_keys[i]);
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
	struct sctl_jsonline l;

	if (sctl_jsonline_parse(raw, &l) != 0) {
		(*bad)++;
		if (!volume) /* unparsed lines cannot be matched against --volume */
			printf("%s\n", raw);
		return;
	}
	const char *vid = sctl_jsonline_get(&l, "volume_id");
	if (!volume || (vid && strcmp(vid, volume) == 0)) {
		if (out == SCTL_OUT_JSON)
			printf("%s\n", raw);
		else
			print_text(&l);
	}
	sctl_jsonline_free(&l);
}

static void sleep_ms(int ms)
{
	struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	nanosleep(&t, NULL);
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
