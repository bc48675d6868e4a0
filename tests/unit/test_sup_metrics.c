/*
 * Unit test of the supervisor's metrics file (supervisor/sup_metrics.c): the
 * check of rpcd's report refuses, each for its own reason and at its line,
 * every report that could forge the supervisor's own series, add another
 * exporter's, or break the format for a collector (a table of them), and
 * accepts well-formed ones, rpcd's among them; mutants of rpcd's report are
 * accepted only when plainly well-formed; 1 MiB reports are checked whole. A
 * report arrives only as a sealed memfd (an unsealed one or a pipe is
 * dropped, and no descriptor leaks); the file is replaced whole and holds the
 * supervisor's figures followed by the last accepted report.
 */
#include "sup_child.h"
#include "sup_metrics.h"
#include "sup_metrics_text.h"
#include "tap.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A report as rpcd_metrics.c renders one: its kinds of family, a histogram, empty ones. */
static const char real_report[] =
    "# HELP sepcsi_csi_calls_total CSI calls answered, by method and gRPC status code.\n"
    "# TYPE sepcsi_csi_calls_total counter\n"
    "sepcsi_csi_calls_total{method=\"CreateVolume\",code=\"OK\"} 3\n"
    "sepcsi_csi_calls_total{method=\"CreateVolume\",code=\"INVALID_ARGUMENT\"} 1\n"
    "sepcsi_csi_calls_total{method=\"NodeStageVolume\",code=\"OK\"} 2\n"
    "# HELP sepcsi_csi_call_duration_seconds Time from a CSI call's arrival to its answer, "
    "by method.\n"
    "# TYPE sepcsi_csi_call_duration_seconds histogram\n"
    "sepcsi_csi_call_duration_seconds_bucket{method=\"CreateVolume\",le=\"0.0005\"} 0\n"
    "sepcsi_csi_call_duration_seconds_bucket{method=\"CreateVolume\",le=\"0.001\"} 0\n"
    "sepcsi_csi_call_duration_seconds_bucket{method=\"CreateVolume\",le=\"0.0025\"} 1\n"
    "sepcsi_csi_call_duration_seconds_bucket{method=\"CreateVolume\",le=\"1\"} 3\n"
    "sepcsi_csi_call_duration_seconds_bucket{method=\"CreateVolume\",le=\"2.5\"} 4\n"
    "sepcsi_csi_call_duration_seconds_bucket{method=\"CreateVolume\",le=\"+Inf\"} 4\n"
    "sepcsi_csi_call_duration_seconds_sum{method=\"CreateVolume\"} 1.234567\n"
    "sepcsi_csi_call_duration_seconds_count{method=\"CreateVolume\"} 4\n"
    "sepcsi_csi_call_duration_seconds_bucket{method=\"unknown\",le=\"10\"} 0\n"
    "sepcsi_csi_call_duration_seconds_bucket{method=\"unknown\",le=\"+Inf\"} 1\n"
    "sepcsi_csi_call_duration_seconds_sum{method=\"unknown\"} 12.000001\n"
    "sepcsi_csi_call_duration_seconds_count{method=\"unknown\"} 1\n"
    "# HELP sepcsi_volumes Volumes in the store, by how far they are set up on this node "
    "(created, staged, published) and kind.\n"
    "# TYPE sepcsi_volumes gauge\n"
    "sepcsi_volumes{state=\"published\",kind=\"xfs\"} 1\n"
    "sepcsi_volumes{state=\"created\",kind=\"block\"} 2\n"
    "# HELP sepcsi_group_snapshots Volume group snapshots in the store.\n"
    "# TYPE sepcsi_group_snapshots gauge\n"
    "sepcsi_group_snapshots 0\n"
    "# HELP sepcsi_operations_in_progress Operations begun and not yet finished.\n"
    "# TYPE sepcsi_operations_in_progress gauge\n"
    "# HELP sepcsi_unrecorded_files Images and snapshots that the store has no row for "
    "(a lost or older store: see docs/operations.md).\n"
    "# TYPE sepcsi_unrecorded_files gauge\n"
    "sepcsi_unrecorded_files{what=\"image\"} 0\n"
    "sepcsi_unrecorded_files{what=\"snapshot\"} 0\n"
    "# HELP sepcsi_store_commits_total Store commits since rpcd started.\n"
    "# TYPE sepcsi_store_commits_total counter\n"
    "sepcsi_store_commits_total 17\n"
    "# HELP sepcsi_helper_reachable 1 if the helper answered rpcd's last question.\n"
    "# TYPE sepcsi_helper_reachable gauge\n"
    "sepcsi_helper_reachable 1\n"
    "# HELP sepcsi_bytes_available Bytes new volumes may still be promised.\n"
    "# TYPE sepcsi_bytes_available gauge\n"
    "sepcsi_bytes_available 18446744073709551615\n"
    "# HELP sepcsi_helper_errors_total Helper requests that failed, by operation and kind; "
    "kind \"refused\" is the helper's refusal.\n"
    "# TYPE sepcsi_helper_errors_total counter\n"
    "sepcsi_helper_errors_total{operation=\"STAGE\",kind=\"refused\"} 1\n";

static bool ok_why(const char *text, const char **why, unsigned *line)
{
	bool r = sup_metrics_text_ok(text, strlen(text), why, line);
	CHECK(r == (*why == NULL));
	return r;
}

static bool ok(const char *text)
{
	const char *why = NULL;
	unsigned line = 0;
	return ok_why(text, &why, &line);
}

/* Refused, for a reason that says so (why holds want), about that line (0: any). */
static void refused(const char *text, const char *want, unsigned at)
{
	const char *why = NULL;
	unsigned line = 0;
	bool r = ok_why(text, &why, &line);
	bool right = !r && strstr(why, want) != NULL && (at == 0 || line == at);
	if (!right)
		fprintf(stderr, "for %s: got %s (line %u), wanted \"%s\" (line %u)\n", text,
		        r ? "accepted" : why, line, want, at);
	CHECK(right);
}

static void test_format(void)
{
	static const struct {
		const char *text, *why;
		unsigned line;
	} bad[] = {
	    /* What the old check let through, and that broke the file for the collector. */
	    {"sepcsi_x abc\n", "not a float", 1},
	    {"sepcsi_x 1 2 3\n", "after the value", 1},
	    {"sepcsi_x 1 1700000000000\n", "timestamp", 1}, /* node-exporter drops the file */
	    {"sepcsi_x 1 -5\n", "timestamp", 1},
	    {"sepcsi_x 1 \n", "after the value", 1},
	    {"sepcsi_x  1\n", "not a float", 1},
	    {"sepcsi_x\n", "not followed by a space", 1},
	    {"sepcsi_x-y 1\n", "not followed by a space", 1},
	    {"sepcsi_x{a=\"b\"}1\n", "not followed by a space", 1},
	    {"sepcsi_x{a=\"b} 1\n", "closing quote", 1},
	    {"sepcsi_x{a=\"b\\\"} 1\n", "closing quote", 1},
	    {"sepcsi_x{a=\"\\t\"} 1\n", "escape in a label value", 1},
	    {"sepcsi_x{a=\"\\u0041\"} 1\n", "escape in a label value", 1},
	    {"sepcsi_x{a=\"b\",} 1\n", "trailing comma", 1},
	    {"sepcsi_x{} 1\n", "name=\"value\"", 1},
	    {"sepcsi_x{a=b} 1\n", "name=\"value\"", 1},
	    {"sepcsi_x{a = \"b\"} 1\n", "name=\"value\"", 1},
	    {"sepcsi_x{1a=\"b\"} 1\n", "name=\"value\"", 1},
	    {"sepcsi_x{a:b=\"c\"} 1\n", "name=\"value\"", 1},
	    {"sepcsi_x{a=\"b\" } 1\n", "not closed by }", 1},
	    {"sepcsi_x{a=\"b\"c=\"d\"} 1\n", "not closed by }", 1},
	    {"sepcsi_x{__name__=\"sepcsi_child_up\"} 1\n", "__", 1},
	    {"sepcsi_x{__meta=\"1\"} 1\n", "__", 1},
	    {"sepcsi_x{a=\"1\",b=\"2\",a=\"3\"} 1\n", "label name twice", 1},
	    /* Values: what Go's ParseFloat or Python's float() would read otherwise. */
	    {"sepcsi_x 0x1p3\n", "not a float", 1},
	    {"sepcsi_x 0x10\n", "not a float", 1},
	    {"sepcsi_x nan\n", "not a float", 1},
	    {"sepcsi_x NAN\n", "not a float", 1},
	    {"sepcsi_x -NaN\n", "not a float", 1},
	    {"sepcsi_x NaN(1)\n", "not a float", 1},
	    {"sepcsi_x nan(0x1)\n", "not a float", 1},
	    {"sepcsi_x infinity\n", "not a float", 1},
	    {"sepcsi_x +Infinity\n", "not a float", 1},
	    {"sepcsi_x +inf\n", "not a float", 1},
	    {"sepcsi_x 1_000\n", "not a float", 1},
	    {"sepcsi_x 1e\n", "not a float", 1},
	    {"sepcsi_x 1e+\n", "not a float", 1},
	    {"sepcsi_x .\n", "not a float", 1},
	    {"sepcsi_x -\n", "not a float", 1},
	    {"sepcsi_x 1e999\n", "not a float", 1}, /* out of range: Go refuses it */
	    {"sepcsi_x 1,5\n", "not a float", 1},
	    {"sepcsi_x 1.5.\n", "not a float", 1},
	    /* Comments. */
	    {"# EOF\n", "comment other", 1},
	    {"#\n", "comment other", 1},
	    {"#HELP sepcsi_x a\n", "comment other", 1},
	    {"# help sepcsi_x a\n", "comment other", 1},
	    {"# HELP sepcsi_x\n", "without a metric name", 1},
	    {"# HELP  sepcsi_x a\n", "without a metric name", 1},
	    {"# HELP sepcsi_x a \\t b\n", "escape in HELP", 1},
	    {"# HELP sepcsi_x ends in \\\n", "escape in HELP", 1},
	    {"# HELP sepcsi_x \\\"q\\\"\n", "escape in HELP", 1},
	    {"# TYPE sepcsi_x gaugey\n", "a type other than", 1},
	    {"# TYPE sepcsi_x Gauge\n", "a type other than", 1},
	    {"# TYPE sepcsi_x gauge extra\n", "a type other than", 1},
	    {"# TYPE sepcsi_x \n", "a type other than", 1},
	    {"# TYPE sepcsi_x gauge\n# TYPE sepcsi_x gauge\n", "second TYPE", 2},
	    {"# TYPE sepcsi_x gauge\n# TYPE sepcsi_x counter\n", "second TYPE", 2},
	    {"# HELP sepcsi_x a\n# HELP sepcsi_x b\n", "second HELP", 2},
	    {"# TYPE sepcsi_x gauge\nsepcsi_x 1\n# TYPE sepcsi_x gauge\n", "after its family", 3},
	    {"sepcsi_x 1\n# TYPE sepcsi_x gauge\n", "after its family", 2},
	    {"# TYPE sepcsi_x gauge\nsepcsi_x 1\n# HELP sepcsi_x late\n", "after its family", 3},
	    /* Families: contiguous, and each sample of the family its lines named. */
	    {"sepcsi_a 1\nsepcsi_b 1\nsepcsi_a{x=\"1\"} 2\n", "two places", 3},
	    {"# TYPE sepcsi_a gauge\nsepcsi_a 1\n# TYPE sepcsi_b gauge\nsepcsi_b 1\n"
	     "# HELP sepcsi_a again\n",
	     "two places", 5},
	    {"# TYPE sepcsi_a gauge\n# TYPE sepcsi_b gauge\n# TYPE sepcsi_a gauge\n", "two places",
	     3},
	    {"# TYPE sepcsi_a gauge\nsepcsi_b 1\n", "not of the family", 2},
	    {"# HELP sepcsi_a Help.\nsepcsi_b 1\n", "not of the family", 2},
	    {"# TYPE sepcsi_a gauge\nsepcsi_a 1\nsepcsi_b 1\n", "not of the family", 3},
	    {"# TYPE sepcsi_a gauge\nsepcsi_a_total 1\n", "not of the family", 2},
	    {"# TYPE sepcsi_a counter\nsepcsi_a_count 1\n", "not of the family", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h 1\n", "not of the family", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h_total 1\n", "not of the family", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h_buckets{le=\"1\"} 1\n", "not of the family", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h_bucket 1\n", "without le", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h_bucket{a=\"1\"} 1\n", "without le", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h_sum{le=\"1\"} 1\n", "_sum or _count", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h_count{le=\"1\"} 1\n", "_sum or _count", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h_bucket{le=\"x\"} 1\n", "not a number", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h_bucket{le=\"NaN\"} 1\n", "not a number", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h_bucket{le=\"1 \"} 1\n", "not a number", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h_bucket{le=\"\"} 1\n", "not a number", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h_bucket{le=\"1\",le=\"2\"} 1\n", "twice", 2},
	    {"# TYPE sepcsi_s summary\nsepcsi_s 1\n", "without quantile", 2},
	    {"# TYPE sepcsi_s summary\nsepcsi_s_sum{quantile=\"0.5\"} 1\n", "_sum or _count", 2},
	    {"# TYPE sepcsi_s summary\nsepcsi_s{quantile=\"half\"} 1\n", "not a number", 2},
	    {"# TYPE sepcsi_s summary\nsepcsi_s_bucket{le=\"1\"} 1\n", "not of the family", 2},
	    /* Two families that may write one name (Go's parser would merge or refuse them). */
	    {"# TYPE sepcsi_c counter\nsepcsi_c 1\n# TYPE sepcsi_c_total gauge\nsepcsi_c_total 2\n",
	     "two families", 3},
	    {"# TYPE sepcsi_h histogram\n# TYPE sepcsi_h_count gauge\n", "two families", 2},
	    {"# TYPE sepcsi_s_sum gauge\n# TYPE sepcsi_s summary\n", "two families", 2},
	    {"# TYPE sepcsi_h_bucket gauge\nsepcsi_h_bucket 1\n# TYPE sepcsi_h histogram\n",
	     "two families", 3},
	    /* The same series twice, whatever the order of its labels. */
	    {"sepcsi_x 1\nsepcsi_x 2\n", "series written twice", 2},
	    {"sepcsi_x{a=\"1\",b=\"2\"} 1\nsepcsi_x{b=\"2\",a=\"1\"} 1\n", "series written twice",
	     2},
	    {"sepcsi_x{a=\"1\"} 1\nsepcsi_x{b=\"\",a=\"1\"} 1\n", "series written twice", 2},
	    {"# TYPE sepcsi_h histogram\nsepcsi_h_bucket{m=\"a\",le=\"1\"} 1\n"
	     "sepcsi_h_bucket{le=\"1\",m=\"a\"} 1\n",
	     "series written twice", 3},
	    /* The supervisor's own names, as a family or as any name a family may write. */
	    {"sepcsi_child_up 1\n", "supervisor writes itself", 1},
	    {"sepcsi_child_up{child=\"rpcd\"} 1\n", "supervisor writes itself", 1},
	    {"# TYPE sepcsi_child counter\nsepcsi_child_total 1\n", "supervisor writes itself", 1},
	    {"# TYPE sepcsi_child counter\n", "supervisor writes itself", 1},
	    {"# TYPE sepcsi_supervisor histogram\n", "supervisor writes itself", 1},
	    {"# TYPE sepcsi_rpcd_report summary\n", "supervisor writes itself", 1},
	    {"# HELP sepcsi_child_restarts_total Forged.\n", "supervisor writes itself", 1},
	    {"# TYPE sepcsi_child_restarts_total counter\n", "supervisor writes itself", 1},
	    {"sepcsi_supervisor_start_time_seconds 1\n", "supervisor writes itself", 1},
	    {"sepcsi_rpcd_report_age_seconds 0\n", "supervisor writes itself", 1},
	    {"sepcsi_ok 1\n# TYPE sepcsi_child_failed gauge\n", "supervisor writes itself", 2},
	    /* Another exporter's series; bytes and lines. */
	    {"node_cpu_seconds_total 1\n", "not sepcsi_", 1},
	    {"# HELP node_x forged\n", "not sepcsi_", 1},
	    {"sepcsi 1\n", "not sepcsi_", 1},
	    {"{a=\"b\"} 1\n", "neither a sample", 1},
	    {" sepcsi_x 1\n", "neither a sample", 1},
	    {"", "empty", 0},
	    {"sepcsi_x 1", "newline", 0},
	    {"sepcsi_x 1\n\nsepcsi_y 2\n", "empty line", 2},
	    {"sepcsi_x{a=\"\x01\"} 1\n", "printable", 1},
	    {"sepcsi_x{a=\"\xc3\xa9\"} 1\n", "printable", 1},
	    {"sepcsi_x 1\r\n", "printable", 1},
	    {"sepcsi_x\t1\n", "printable", 1},
	};
	static const char *const good[] = {
	    real_report,
	    "# HELP sepcsi_x Help.\n# TYPE sepcsi_x counter\nsepcsi_x{a=\"b\"} 3\n",
	    "sepcsi_volumes 0\n",
	    "sepcsi_a 1\nsepcsi_b 1\nsepcsi_a_b:c 2\n",
	    "# TYPE sepcsi_x gauge\n# HELP sepcsi_x TYPE first.\nsepcsi_x 1\n",
	    "# HELP sepcsi_x \n# HELP sepcsi_y a \\\\ b \\n \"c\" {d} #e\nsepcsi_y 1\n",
	    "# TYPE sepcsi_empty gauge\n# TYPE sepcsi_empty2 counter\n",
	    "# TYPE sepcsi_c counter\nsepcsi_c 1\nsepcsi_c_total 2\n",
	    "# TYPE sepcsi_u untyped\nsepcsi_u{a=\"1\"} 1\nsepcsi_u{a=\"2\"} 1\nsepcsi_u 3\n",
	    "sepcsi_v{a=\"NaN\"} NaN\nsepcsi_v{a=\"+\"} +Inf\nsepcsi_v{a=\"-\"} -Inf\n"
	    "sepcsi_v{a=\"i\"} Inf\nsepcsi_v{a=\"1\"} -0\nsepcsi_v{a=\"2\"} +1.5e-3\n"
	    "sepcsi_v{a=\"3\"} .5\nsepcsi_v{a=\"4\"} 5.\nsepcsi_v{a=\"5\"} 1E+10\n"
	    "sepcsi_v{a=\"6\"} 123456789012345678901234567890\nsepcsi_v{a=\"7\"} 1e-400\n",
	    "sepcsi_l{a=\"q\\\"uote\\\\ back\\nline\",b=\"},=#{ \"} 1\n"
	    "sepcsi_l{b=\"},=#{ \",a=\"other\"} 1\n",
	    "sepcsi_l{_a=\"1\",a_1=\"\",A=\"x\"} 1\n",
	    "# TYPE sepcsi_s summary\nsepcsi_s{quantile=\"0.5\"} 1\nsepcsi_s{quantile=\"0.99\"} 2\n"
	    "sepcsi_s_sum 3\nsepcsi_s_count 4\n",
	    "# TYPE sepcsi_h histogram\nsepcsi_h_bucket{le=\"1e-3\"} "
	    "0\nsepcsi_h_bucket{le=\"Inf\"} 0\n"
	    "sepcsi_h_sum NaN\nsepcsi_h_count 0\n# TYPE sepcsi_h_other gauge\nsepcsi_h_other 1\n",
	    /* le and quantile are plain labels outside histograms and summaries. */
	    "sepcsi_le{le=\"x\"} 1\n# TYPE sepcsi_g gauge\nsepcsi_g{quantile=\"\"} 1\n",
	    /* Names that merely look like the supervisor's. */
	    "sepcsi_childish_total 2\n# TYPE sepcsi_child gauge\nsepcsi_child 1\n",
	    "sepcsi_rpcd_report 1\nsepcsi_supervisors 2\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		refused(bad[i].text, bad[i].why, bad[i].line);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		const char *why = NULL;
		unsigned line = 0;
		if (!ok_why(good[i], &why, &line))
			fprintf(stderr, "refused: %s(%s, line %u)\n", good[i], why, line);
		CHECK(why == NULL);
	}

	char big[2048];
	memset(big, 'x', sizeof(big));
	memcpy(big, "sepcsi_", 7);
	big[sizeof(big) - 2] = '\n';
	big[sizeof(big) - 1] = '\0';
	refused(big, "over 1024 bytes", 1);
	/* The longest line passes; a NUL byte does not. */
	memset(big, 'x', sizeof(big));
	memcpy(big, "sepcsi_", 7);
	memcpy(big + 1024 - 2, " 1\n", 4);
	CHECK(ok(big));
	const char *why = NULL;
	unsigned line = 0;
	CHECK(!sup_metrics_text_ok("sepcsi_x 1\0\n", 12, &why, &line) && strstr(why, "printable"));
}

/*
 * What every accepted report shows even to a reader that knows little of the
 * format: sepcsi_ HELP, TYPE and sample lines only; no name of the
 * supervisor's on a sample, nor a counter, histogram or summary that could
 * write one; a sample ends in one space and a plain number; no series comes
 * twice as written. An independent, looser check to hold mutants against.
 */
static bool plainly_fine(const char *text)
{
	static const char *const own[] = {"sepcsi_child_", "sepcsi_supervisor_",
	                                  "sepcsi_rpcd_report_"};
	static const char *const words[] = {"NaN", "+Inf", "-Inf", "Inf"};
	const char *series[512];
	size_t lens[512], n = 0;

	for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
		size_t len = (size_t)(strchr(l, '\n') - l);
		const char *name = l, *sp = memrchr(l, ' ', len), *v;
		bool word = false;

		if (strncmp(l, "# HELP sepcsi_", 14) == 0 ||
		    strncmp(l, "# TYPE sepcsi_", 14) == 0) {
			char fam[1100];
			size_t fn = strcspn(l + 7, " ");
			bool multi = strncmp(l, "# TYPE", 6) == 0 &&
			             strncmp(l + 8 + fn, "gauge", 5) != 0 &&
			             strncmp(l + 8 + fn, "untyped", 7) != 0;
			snprintf(fam, sizeof(fam), "%.*s%s", (int)fn, l + 7, multi ? "_" : "");
			for (size_t i = 0; i < 3; i++)
				if (strncmp(fam, own[i], strlen(own[i])) == 0)
					return false;
			continue;
		}
		if (strncmp(name, "sepcsi_", 7) != 0 || !sp || n == 512)
			return false;
		for (size_t i = 0; i < 3; i++)
			if (strncmp(name, own[i], strlen(own[i])) == 0)
				return false;
		v = sp + 1;
		for (size_t i = 0; i < 4; i++)
			word |= (size_t)(l + len - v) == strlen(words[i]) &&
			        strncmp(v, words[i], strlen(words[i])) == 0;
		if (!word) {
			char *end;
			if (v == l + len || strspn(v, "0123456789.eE+-") != (size_t)(l + len - v) ||
			    (strtod(v, &end), end != l + len))
				return false;
		}
		for (size_t i = 0; i < n; i++)
			if (lens[i] == (size_t)(sp - l) && memcmp(series[i], l, lens[i]) == 0)
				return false;
		series[n] = l;
		lens[n++] = (size_t)(sp - l);
	}
	return true;
}

static uint32_t rnd(void)
{
	static uint32_t x = 2463534242u; /* xorshift32, fixed seed: the same mutants every run */
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x;
}

/*
 * Mutants of the real report (bytes replaced, inserted or removed; lines
 * doubled or swapped): none crashes the check, and every one it accepts is
 * plainly fine. Then each sample line doubled, and each HELP or TYPE line
 * doubled, is refused.
 */
static void test_mutants(void)
{
	static const char alphabet[] = " \"\\{}=,#_:x0+-.eEINaf\n";
	static char m[8192];
	size_t base = strlen(real_report), accepted = 0, wrong = 0;

	CHECK(plainly_fine(real_report)); /* the looser check itself */
	CHECK(!plainly_fine("sepcsi_x abc\n") && !plainly_fine("sepcsi_x 1\nsepcsi_x 2\n"));
	CHECK(!plainly_fine("# TYPE sepcsi_child counter\n") && !plainly_fine("sepcsi_x 0x1\n"));

	for (int iter = 0; iter < 20000; iter++) {
		size_t n = base;
		memcpy(m, real_report, n + 1);
		for (uint32_t k = 1 + rnd() % 3; k > 0; k--) {
			size_t at = rnd() % n, op = rnd() % 5;
			char ch = alphabet[rnd() % (sizeof(alphabet) - 1)];
			if (op == 0) {
				m[at] = ch;
			} else if (op == 1 && n + 1 < sizeof(m)) {
				memmove(m + at + 1, m + at, n - at + 1);
				m[at] = ch;
				n++;
			} else if (op == 2 && n > 1) {
				memmove(m + at, m + at + 1, n - at);
				n--;
			} else { /* the line at `at` doubled (3) or swapped with the next (4) */
				char *l = memrchr(m, '\n', at), *e, *e2;
				l = l ? l + 1 : m;
				e = strchr(l, '\n');
				if (!e || (op == 3 && n + (size_t)(e + 1 - l) >= sizeof(m)))
					continue;
				size_t len = (size_t)(e + 1 - l);
				if (op == 3) {
					memmove(e + 1 + len, e + 1, (size_t)(m + n - e));
					memcpy(e + 1, l, len);
					n += len;
				} else if ((e2 = strchr(e + 1, '\n')) != NULL) {
					char tmp[2048];
					size_t len2 = (size_t)(e2 - e);
					if (len > sizeof(tmp))
						continue;
					memcpy(tmp, l, len);
					memmove(l, e + 1, len2);
					memcpy(l + len2, tmp, len);
				}
			}
		}
		const char *why = NULL;
		unsigned line = 0;
		bool r = sup_metrics_text_ok(m, n, &why, &line);
		if (r) {
			accepted++;
			if (strlen(m) != n || !plainly_fine(m)) {
				wrong++;
				fprintf(stderr, "accepted a mutant that is not plainly fine:\n%s\n",
				        m);
			}
		}
		CHECK(r == (why == NULL));
	}
	CHECK(wrong == 0);
	CHECK(accepted > 100); /* some mutants are good reports (a digit changed, ...) */
	printf("# %zu of 20000 mutants accepted\n", accepted);

	for (const char *l = real_report; *l; l = strchr(l, '\n') + 1) {
		size_t before = (size_t)(l - real_report), len = (size_t)(strchr(l, '\n') + 1 - l);
		snprintf(m, sizeof(m), "%.*s%.*s%s", (int)before, real_report, (int)len, l, l);
		refused(m, l[0] == '#' ? (l[2] == 'H' ? "second HELP" : "second TYPE") : "twice",
		        0);
	}
}

/* Reports of 1 MiB, the most the supervisor reads: checked whole, with bounded work. */
static void test_big(void)
{
	size_t cap = SUP_METRICS_RPCD_MAX, n = 0;
	char *t = malloc(cap + 1);
	int i = 0;
	const char *why;
	unsigned line;

	if (!t)
		abort();
	for (; n + 64 < cap; i++) /* one family, many series */
		n += (size_t)sprintf(t + n, "sepcsi_many{i=\"%d\",j=\"x\"} %d\n", i, i);
	CHECK(sup_metrics_text_ok(t, n, &why, &line));
	n += (size_t)sprintf(t + n, "sepcsi_many{j=\"x\",i=\"17\"} 0\n"); /* a series again */
	CHECK(!sup_metrics_text_ok(t, n, &why, &line) && strstr(why, "twice") &&
	      line == (unsigned)i + 1);
	for (n = 0, i = 0; n + 1100 < cap; i++) { /* families with long names: 4 keys each */
		n += (size_t)sprintf(t + n, "# TYPE sepcsi_%d_", i);
		memset(t + n, 'h', 990);
		n += 990;
		n += (size_t)sprintf(t + n, " histogram\n");
	}
	CHECK(sup_metrics_text_ok(t, n, &why, &line));
	free(t);
}

static int memfd_with(const char *text, unsigned seals)
{
	int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
	    (seals && fcntl(fd, F_ADD_SEALS, seals) < 0)) {
		perror("memfd");
		exit(1);
	}
	return fd;
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static char *slurp(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		(void)fclose(f); /* read only: nothing to flush */
	buf[n] = '\0';
	return buf;
}

static void test_reports(void)
{
	static struct sup_config cfg;
	static struct sup s;
	char dir[] = "/tmp/sup-metrics-XXXXXX";
	const unsigned all = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(cfg.metrics_file, sizeof(cfg.metrics_file), "%s/m.prom", dir);
	s.cfg = &cfg;
	s.child[SUP_HELPER].name = "mounthelper";
	s.child[SUP_RPCD].name = "rpcd";
	s.child[SUP_HELPER].sm.state = SUP_ST_RUNNING;
	s.child[SUP_RPCD].sm.state = SUP_ST_RUNNING;

	/* Unsealed, half-sealed, a pipe: dropped, and closed. */
	int fd = memfd_with("sepcsi_good 1\n", 0);
	sup_metrics_from_rpcd(&s, fd);
	CHECK(!fd_open(fd) && s.metrics.rpcd_text == NULL);
	fd = memfd_with("sepcsi_good 1\n", F_SEAL_GROW | F_SEAL_SHRINK);
	sup_metrics_from_rpcd(&s, fd);
	CHECK(!fd_open(fd) && s.metrics.rpcd_text == NULL);
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK(write(p[1], "sepcsi_good 1\n", 14) == 14);
	sup_metrics_from_rpcd(&s, p[0]);
	CHECK(!fd_open(p[0]) && s.metrics.rpcd_text == NULL);
	close(p[1]);
	/* Sealed but not to be written anywhere (no --metrics-file): closed, no check started. */
	cfg.metrics_file[0] = '\0';
	fd = memfd_with("sepcsi_good 1\n", all);
	sup_metrics_from_rpcd(&s, fd);
	CHECK(!fd_open(fd) && s.metrics.check.pid == 0 && s.metrics.rpcd_text == NULL);
	snprintf(cfg.metrics_file, sizeof(cfg.metrics_file), "%s/m.prom", dir);

	/*
	 * What the check accepted (sepcsi-metrics-check parses; test_metrics.py runs
	 * it) is copied only after the supervisor's own look, which parses nothing:
	 * printable lines, none of its names anywhere, whatever the check said.
	 */
	static const char *const forged[] = {"sepcsi_child_up{child=\"rpcd\"} 1\n",
	                                     "# HELP sepcsi_x see sepcsi_supervisor_x\n",
	                                     "sepcsi_x{a=\"sepcsi_rpcd_report_age_seconds\"} 1\n",
	                                     "sepcsi_x 1\n\x01\n",
	                                     "sepcsi_x 1",
	                                     "sepcsi_x 1\nnode_forged_total 1\n",
	                                     "up 0\n"};
	for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
		fd = memfd_with(forged[i], all);
		sup_metrics_accept(&s, fd);
		CHECK(!fd_open(fd) && s.metrics.rpcd_text == NULL);
	}
	CHECK(access(cfg.metrics_file, F_OK) != 0); /* nothing accepted, nothing written */

	/* A good one: kept, and the file holds both parts. */
	fd = memfd_with("# TYPE sepcsi_good gauge\nsepcsi_good 1\n", all);
	sup_metrics_accept(&s, fd);
	CHECK(!fd_open(fd) && s.metrics.rpcd_text != NULL);
	const char *text = slurp(cfg.metrics_file);
	CHECK(strstr(text, "sepcsi_child_up{child=\"rpcd\"} 1\n") != NULL);
	CHECK(strstr(text, "sepcsi_child_restarts_total{child=\"mounthelper\",reason=\"seccomp\"} "
	                   "0\n") != NULL);
	CHECK(strstr(text, "sepcsi_rpcd_report_age_seconds ") != NULL);
	CHECK(strstr(text, "\nsepcsi_good 1\n") != NULL);

	/* A refused one then: the one before stays, and so does the file. */
	const char *kept = s.metrics.rpcd_text;
	fd = memfd_with("sepcsi_good 2\nsepcsi_child_x 1\n", all);
	sup_metrics_accept(&s, fd);
	CHECK(!fd_open(fd) && s.metrics.rpcd_text == kept);
	text = slurp(cfg.metrics_file);
	CHECK(strstr(text, "\nsepcsi_good 1\n") != NULL && strstr(text, "sepcsi_good 2") == NULL);

	/* rpcd's real report is kept whole, after the supervisor's series. */
	CHECK(sup_metrics_text_ok(real_report, strlen(real_report), &(const char *){NULL},
	                          &(unsigned){0}));
	fd = memfd_with(real_report, all);
	sup_metrics_accept(&s, fd);
	CHECK(s.metrics.rpcd_text != NULL && strcmp(s.metrics.rpcd_text, real_report) == 0);
	text = slurp(cfg.metrics_file);
	CHECK(strlen(text) > strlen(real_report) &&
	      strcmp(text + strlen(text) - strlen(real_report), real_report) == 0);

	/* A death counts by how it ended; rpcd's part goes with rpcd. */
	sup_metrics_death(&s, SUP_HELPER, SIGSYS, false); /* a wait status: killed by SIGSYS */
	sup_metrics_death(&s, SUP_RPCD, 9, true);
	sup_metrics_death(&s, SUP_RPCD, 1 << 8, false); /* exit 1 */
	sup_metrics_rpcd_gone(&s);
	s.child[SUP_RPCD].sm.state = SUP_ST_BACKOFF;
	sup_metrics_write(&s);
	text = slurp(cfg.metrics_file);
	CHECK(strstr(text, "sepcsi_child_restarts_total{child=\"mounthelper\",reason=\"seccomp\"} "
	                   "1\n") != NULL);
	CHECK(strstr(text, "sepcsi_child_restarts_total{child=\"rpcd\",reason=\"killed\"} 1\n") !=
	      NULL);
	CHECK(strstr(text, "sepcsi_child_restarts_total{child=\"rpcd\",reason=\"exit\"} 1\n") !=
	      NULL);
	CHECK(strstr(text, "sepcsi_child_up{child=\"rpcd\"} 0\n") != NULL);
	CHECK(strstr(text, "sepcsi_good") == NULL);

	/* Only the file is left in its directory: no temporary file. */
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/.m.prom.%d.tmp", dir, (int)getpid());
	CHECK(access(tmp, F_OK) != 0);
	unlink(cfg.metrics_file);
	CHECK(rmdir(dir) == 0);
}

/* Start the real check on text through sup_metrics_from_rpcd, wait for it, hand its end back. */
static pid_t check_of(struct sup *s, const char *text)
{
	int fd = memfd_with(text, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK);
	sup_metrics_from_rpcd(s, fd);
	return s->metrics.check.pid;
}

/* pid's end handed back; a report that waited may be checked next. */
static void end_of_then(struct sup *s, pid_t pid, int *status)
{
	CHECK(waitpid(pid, status, 0) == pid);
	CHECK(sup_metrics_check_ended(s, pid, *status) == 1);
}

static void end_of(struct sup *s, pid_t pid, int *status)
{
	end_of_then(s, pid, status);
	CHECK(s->metrics.check.pid == 0);
}

/*
 * sepcsi-metrics-check as the supervisor runs it (as root: its ids and the
 * empty capability sets are set by sup_spawn): one at a time, its verdict
 * taken, a refusal's reason logged, the stale and the overdue refused.
 */
static void test_check(void)
{
	static struct sup_config cfg;
	static struct sup s;
	char dir[] = "/tmp/sup-check-XXXXXX";
	int st;
	if (geteuid() != 0 || !mkdtemp(dir)) {
		printf("# not root: the check's own process is tested by test_metrics.py only\n");
		return;
	}
	snprintf(cfg.metrics_file, sizeof(cfg.metrics_file), "%s/m.prom", dir);
	cfg.metrics_uid = cfg.metrics_gid = 65533;
	s.cfg = &cfg;
	s.child[SUP_HELPER].name = "mounthelper";
	s.child[SUP_RPCD].name = "rpcd";
	snprintf(s.metrics.check_path, sizeof(s.metrics.check_path), "%s", SEPCSI_METRICS_CHECK);

	/*
	 * Accepted: kept and written. Reports that come while it runs wait: the
	 * newest is checked next, an older one is dropped unread.
	 */
	pid_t pid = check_of(&s, "# TYPE sepcsi_a gauge\nsepcsi_a 1\n");
	CHECK(pid > 0);
	int older = memfd_with("sepcsi_b 1\n", F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK);
	int newest = memfd_with("sepcsi_b 2\n", F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK);
	sup_metrics_from_rpcd(&s, older);
	sup_metrics_from_rpcd(&s, newest);
	CHECK(!fd_open(older) && fd_open(newest) && s.metrics.check.pid == pid);
	CHECK(sup_metrics_check_ended(&s, pid + 1, 0) == 0); /* not the check: untouched */
	end_of_then(&s, pid, &st);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(s.metrics.rpcd_text &&
	      strcmp(s.metrics.rpcd_text, "# TYPE sepcsi_a gauge\nsepcsi_a 1\n") == 0);
	pid = s.metrics.check.pid; /* the newest one's, started at once */
	CHECK(pid > 0 && s.metrics.queued == 0);
	end_of(&s, pid, &st);
	CHECK(s.metrics.rpcd_text && strcmp(s.metrics.rpcd_text, "sepcsi_b 2\n") == 0);

	/* rpcd gone while one waits: the waiting one goes too. */
	pid = check_of(&s, "sepcsi_a 3\n");
	newest = memfd_with("sepcsi_b 3\n", F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK);
	sup_metrics_from_rpcd(&s, newest);
	sup_metrics_rpcd_gone(&s);
	CHECK(!fd_open(newest));
	end_of(&s, pid, &st);
	CHECK(s.metrics.rpcd_text == NULL);

	/* Refused by the check, with its line: the one before stays. */
	const char *kept = s.metrics.rpcd_text;
	end_of(&s, check_of(&s, "sepcsi_a 1\nsepcsi_a 2\n"), &st);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && s.metrics.rpcd_text == kept);

	/* rpcd died meanwhile: an accepted report of the dead one is not kept. */
	pid = check_of(&s, "sepcsi_c 1\n");
	sup_metrics_rpcd_gone(&s);
	end_of(&s, pid, &st);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && s.metrics.rpcd_text == NULL);

	/* Overdue: killed at its deadline (SIGSTOPped here, as if it hung), and refused. */
	pid = check_of(&s, "sepcsi_d 1\n");
	kill(pid, SIGSTOP);
	s.metrics.check.deadline = 0;
	sup_metrics_check_timer(&s);
	CHECK(s.metrics.check.killed);
	end_of(&s, pid, &st);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && s.metrics.rpcd_text == NULL);

	/* A program that is not there: its child ends 127, the report is refused. */
	snprintf(s.metrics.check_path, sizeof(s.metrics.check_path), "%s/none", dir);
	end_of(&s, check_of(&s, "sepcsi_e 1\n"), &st);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 127 && s.metrics.rpcd_text == NULL);
	unlink(cfg.metrics_file);
	CHECK(rmdir(dir) == 0);
}

int main(void)
{
	test_format();
	test_mutants();
	test_big();
	test_reports();
	test_check();
	return tap_done("test_sup_metrics");
}
