/*
 * `sepcsictl metrics`: the metrics file the supervisor writes (its
 * --metrics-file), Prometheus' text format. Runs as the operator; it reads
 * the file and never writes it. Text output is the file as it is; with
 * --output json it is one object per sample, {"name", "labels", "value"}.
 */
#include <errno.h>
#include <json.h>
#include <stdlib.h>
#include <string.h>

#include "sctl.h"
#include "sctl_jsonline.h"

#define DEFAULT_METRICS_FILE "/var/lib/sepcsi/metrics.prom"

static void metrics_help(FILE *o)
{
	fprintf(o,
	        "usage: sepcsictl metrics [--file PATH] [--output text|json]\n\n"
	        "The driver's metrics, as the supervisor last wrote them: CSI calls, errors "
	        "and latency,\nvolumes, snapshots and attachments, bytes promised and free, "
	        "restarts, the helper's\nrefusals. No CSI socket needed.\n\n"
	        "flags:\n"
	        "  --file PATH   the supervisor's --metrics-file (default %s)\n"
	        "With --output json, one JSON object per sample: name, labels, value.\n",
	        DEFAULT_METRICS_FILE);
}

/*
 * A label value at p, just past its opening quote, unescaped in place (the
 * format's escapes: backslash, quote and n): true with *next past its closing
 * quote, false if it has none.
 */
static bool label_value(char *p, char **next)
{
	char *w = p;
	for (; *p && *p != '"'; p++) {
		char ch = *p;
		if (ch == '\\' && p[1] != '\0') {
			ch = *++p;
			if (ch == 'n')
				ch = '\n';
		}
		*w++ = ch;
	}
	if (*p != '"')
		return false;
	*w = '\0';
	*next = p + 1;
	return true;
}

/* One sample line, name{k="v",...} value, as JSON; false if it is not one. */
static bool sample_json(char *line, json_object **out)
{
	char *p = line + strcspn(line, "{ "), *end;
	json_object *labels = json_object_new_object();

	if (*p == '{') {
		*p++ = '\0';
		while (*p != '}') {
			char *key = p, *eq = strchr(p, '=');
			if (!eq || eq[1] != '"' || !label_value(eq + 2, &p) ||
			    (*p != ',' && *p != '}'))
				goto bad;
			*eq = '\0';
			json_object_object_add(labels, key, json_object_new_string(eq + 2));
			if (*p == ',')
				p++;
		}
		p++;
	}
	if (*p != ' ')
		goto bad;
	*p++ = '\0';
	double v = strtod(p, &end);
	if (end == p || *line == '\0')
		goto bad;
	*out = json_object_new_object();
	json_object_object_add(*out, "name", json_object_new_string(line));
	json_object_object_add(*out, "labels", labels);
	json_object_object_add(*out, "value", json_object_new_double(v));
	return true;
bad:
	json_object_put(labels);
	return false;
}

int sctl_metrics_main(int argc, char **argv, struct sctl_opts *o)
{
	enum { OPT_FILE = SCTL_OPT_OWN };
	static const struct option longopts[] = {
	    {"file", required_argument, NULL, OPT_FILE},
	    SCTL_COMMON_OPTIONS,
	};
	const char *path = DEFAULT_METRICS_FILE;
	int c;

	optind = 0;
	while ((c = sctl_getopt(argc, argv, "-:o:h", longopts, "metrics: ", o, NULL)) != -1) {
		if (c == OPT_FILE) {
			path = optarg;
		} else if (c == SCTL_OPT_HELP) {
			metrics_help(stdout);
			return SCTL_EXIT_OK;
		} else {
			return SCTL_EXIT_USAGE;
		}
	}
	FILE *f = fopen(path, "re");
	if (!f) {
		int e = errno;
		fprintf(stderr, "sepcsictl: metrics: cannot open %s: %s%s\n", path, strerror(e),
		        e == ENOENT ? " (the supervisor's --metrics-file; is it running, and "
		                      "with that file?)"
		                    : "");
		return e == ENOENT ? SCTL_EXIT_ABSENT : SCTL_EXIT_FAILURE;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = SCTL_EXIT_OK;
	while ((n = getline(&line, &cap, f)) > 0) {
		json_object *j;
		if (o->output == SCTL_OUT_TEXT) {
			if (fwrite(line, 1, (size_t)n, stdout) != (size_t)n)
				rc = SCTL_EXIT_FAILURE;
			continue;
		}
		if (line[n - 1] == '\n')
			line[n - 1] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		if (!sample_json(line, &j)) {
			fprintf(stderr, "sepcsictl: metrics: not a sample: %s\n", line);
			rc = SCTL_EXIT_FAILURE;
			continue;
		}
		sctl_json_print(stdout, j);
		fputc('\n', stdout);
	}
	free(line);
	(void)fclose(f); /* read only: nothing to flush */
	return rc;
}
