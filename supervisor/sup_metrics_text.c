/*
 * The check of rpcd's metrics report, run by sepcsi-metrics-check
 * (sup_metrics_check.c), never by the supervisor: the one parser of text rpcd
 * shaped runs without capabilities, under ids and a filter of its own, and
 * the supervisor only copies what it accepted (sup_metrics.c).
 *
 * A report passes only if it is the text format in a strict form that Go's
 * parser (node-exporter's textfile collector) and Python's prometheus_client
 * read alike:
 *
 *  - every line 1 to 1024 bytes of printable ASCII, ended by '\n';
 *  - comments only "# HELP <name> <text>" (escapes \\ and \n only) and
 *    "# TYPE <name> counter|gauge|histogram|summary|untyped": at most one of
 *    each per family, both before its first sample;
 *  - samples "<name>[{<label>="<value>",...}] <value>", one space each, no
 *    trailing comma, no timestamp (node-exporter skips a file that has one);
 *    label names [a-zA-Z_][a-zA-Z0-9_]*, not __*, none twice in a sample;
 *    label values escape only \\, \" and \n; a value is a decimal (sign and
 *    exponent optional), NaN, +Inf, -Inf or Inf, never hex or "infinity";
 *  - a sample is of the family its HELP or TYPE lines named: <f> (untyped,
 *    gauge), <f> or <f>_total (counter), <f>_bucket{le}, <f>_sum and
 *    <f>_count (histogram), <f>{quantile}, <f>_sum and <f>_count (summary),
 *    le and quantile floats but not NaN, and only there; a sample with no
 *    HELP or TYPE before it is an untyped family of its own;
 *  - a family's lines are contiguous; no two families may write one name
 *    (a counter x may write x_total, so no family x_total beside it), and no
 *    series comes twice, whatever the order of its labels (a label with an
 *    empty value counts as none, as in Prometheus);
 *  - every name is sepcsi_*, and none a family may write begins with the
 *    supervisor's own sepcsi_child_, sepcsi_supervisor_, sepcsi_rpcd_report_.
 *
 * So rpcd can report wrong figures about itself, but cannot add another
 * exporter's series or make a collector drop the file.
 */
#include "sup_metrics_text.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const own_prefixes[] = SUP_METRICS_OWN_PREFIXES;

static bool own_name(const char *name)
{
	for (size_t i = 0; i < sizeof(own_prefixes) / sizeof(own_prefixes[0]); i++)
		if (strncmp(name, own_prefixes[i], strlen(own_prefixes[i])) == 0)
			return true;
	return false;
}

/*
 * The check of rpcd's report. Each line is read up to its '\n', which no
 * token takes, so no scan runs past a line (and the line is printable ASCII
 * before it is parsed). Every name a family may put in the file and every
 * series are copied as keys into one buffer, sorted at the end: a key seen
 * twice is a family that comes back, two families sharing a name, or a series
 * written twice. The keys take a few times the report's size at most.
 */
#define LINE_MAX_BYTES 1024
#define LABELS_MAX     (LINE_MAX_BYTES / 5) /* a="" and a comma: 5 bytes a label */

enum mtype { MT_UNTYPED, MT_COUNTER, MT_GAUGE, MT_HISTOGRAM, MT_SUMMARY, MT_N };

/*
 * Per type: the names its samples may have (the family's name and one of these
 * suffixes), and the label that the first of them needs and the others may not
 * have (le on a histogram's buckets, quantile on a summary's quantiles).
 */
static const struct {
	const char *name, *special, *suffix[3];
} mtypes[MT_N] = {
    [MT_UNTYPED] = {"untyped", NULL, {""}},
    [MT_COUNTER] = {"counter", NULL, {"", "_total"}},
    [MT_GAUGE] = {"gauge", NULL, {""}},
    [MT_HISTOGRAM] = {"histogram", "le", {"_bucket", "_sum", "_count"}},
    [MT_SUMMARY] = {"summary", "quantile", {"", "_sum", "_count"}},
};

/* A key: where in check.buf, and the line that wrote it. */
struct key {
	size_t off;
	unsigned line;
};

struct check {
	const char *why;
	unsigned line, bad_line; /* the line being read, the one refused; from 1 */
	const char *fam;         /* the current family's name, in the text (NULL: none yet) */
	size_t fam_len;
	unsigned fam_line;
	enum mtype type;
	bool declared, helped, typed, sampled;
	char *buf; /* the keys, each ended by a NUL */
	size_t len, cap, start;
	struct key *keys;
	size_t nkeys, keys_cap;
};

/* A label as written, name="value", and the length of its name. */
struct label {
	const char *p;
	size_t n, name_n;
};

static bool fail_at(struct check *c, unsigned line, const char *why)
{
	c->why = why;
	c->bad_line = line;
	return false;
}

static bool fail(struct check *c, const char *why)
{
	return fail_at(c, c->line, why);
}

static bool digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* The length of the name at p: [a-zA-Z_:][a-zA-Z0-9_:]*, without ':' for a label. */
static size_t name_len(const char *p, bool colon)
{
	size_t n = 0;
	while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') || p[n] == '_' ||
	       (colon && p[n] == ':') || (n > 0 && digit(p[n])))
		n++;
	return n;
}

/*
 * The length of the float at p, 0 if none: NaN, +Inf, -Inf, Inf, or a decimal
 * with an optional sign and exponent that fits a double. Both Go's and
 * Python's parsers read these alike; hex, "nan(...)", "infinity", "1_0" are
 * refused. strtod only measures the range (the supervisor keeps the C locale).
 */
static size_t float_len(const char *p)
{
	static const char *const words[] = {"NaN", "+Inf", "-Inf", "Inf"};
	const char *s = p + (*p == '+' || *p == '-');
	size_t digits = 0;
	char *end;

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strncmp(p, words[i], strlen(words[i])) == 0)
			return strlen(words[i]);
	for (; digit(*s); s++)
		digits++;
	if (*s == '.')
		for (s++; digit(*s); s++)
			digits++;
	if (digits && (*s == 'e' || *s == 'E')) {
		s += 1 + (s[1] == '+' || s[1] == '-');
		if (!digit(*s))
			return 0;
		while (digit(*s))
			s++;
	}
	if (!digits)
		return 0;
	errno = 0;
	double v = strtod(p, &end);
	return end == s && !(errno == ERANGE && isinf(v)) ? (size_t)(s - p) : 0;
}

static void put(struct check *c, const char *p, size_t n)
{
	if (c->len + n > c->cap) {
		c->cap = (c->len + n) * 2;
		c->buf = realloc(c->buf, c->cap);
		if (!c->buf)
			abort();
	}
	memcpy(c->buf + c->len, p, n);
	c->len += n;
}

/* The bytes put since the last key are a key, written on line; returns it. */
static const char *end_key(struct check *c, unsigned line)
{
	put(c, "", 1);
	if (c->nkeys == c->keys_cap) {
		c->keys_cap = c->keys_cap ? c->keys_cap * 2 : 64;
		c->keys = reallocarray(c->keys, c->keys_cap, sizeof(*c->keys));
		if (!c->keys)
			abort();
	}
	c->keys[c->nkeys++] = (struct key){c->start, line};
	c->start = c->len;
	return c->buf + c->keys[c->nkeys - 1].off;
}

/* A name the current family may write, its own plus sfx, as a key; not the supervisor's. */
static bool name_key(struct check *c, const char *sfx)
{
	put(c, c->fam, c->fam_len);
	put(c, sfx, strlen(sfx));
	return !own_name(end_key(c, c->fam_line)) ||
	       fail_at(c, c->fam_line, "a name the supervisor writes itself");
}

/* The current family ends: every name it may write becomes a key. */
static bool end_family(struct check *c)
{
	const char *const *sfx = mtypes[c->type].suffix;
	bool ok = !c->fam || name_key(c, "");

	for (size_t i = 0; c->fam && ok && i < 3; i++)
		ok = !sfx[i] || !*sfx[i] || name_key(c, sfx[i]);
	return ok;
}

static bool start_family(struct check *c, const char *name, size_t n)
{
	if (!end_family(c))
		return false;
	if (n < 7 || memcmp(name, "sepcsi_", 7) != 0)
		return fail(c, "a name not sepcsi_*");
	c->fam = name;
	c->fam_len = n;
	c->fam_line = c->line;
	c->type = MT_UNTYPED;
	c->declared = c->helped = c->typed = c->sampled = false;
	return true;
}

/* Which of the current family's suffixes makes name, or -1. */
static int suffix_of(const struct check *c, const char *name, size_t n)
{
	if (!c->fam || n < c->fam_len || memcmp(name, c->fam, c->fam_len) != 0)
		return -1;
	for (int i = 0; i < 3 && mtypes[c->type].suffix[i]; i++)
		if (strlen(mtypes[c->type].suffix[i]) == n - c->fam_len &&
		    memcmp(name + c->fam_len, mtypes[c->type].suffix[i], n - c->fam_len) == 0)
			return i;
	return -1;
}

/* # HELP name text, or # TYPE name type: before the family's samples, once each. */
static bool comment(struct check *c, const char *l)
{
	bool help = strncmp(l, "# HELP ", 7) == 0;
	const char *name = l + 7, *p;
	size_t n;

	if (!help && strncmp(l, "# TYPE ", 7) != 0)
		return fail(c, "a comment other than # HELP or # TYPE");
	n = name_len(name, true);
	if (n == 0 || name[n] != ' ')
		return fail(c, "a HELP or TYPE line without a metric name and a space after it");
	if (c->fam && n == c->fam_len && memcmp(name, c->fam, n) == 0) {
		if (c->sampled)
			return fail(c, "a HELP or TYPE line after its family's samples");
	} else if (!start_family(c, name, n)) {
		return false;
	}
	c->declared = true;
	p = name + n + 1;
	if (help) {
		if (c->helped)
			return fail(c, "a second HELP line for a family");
		for (c->helped = true; *p != '\n'; p++)
			if (*p == '\\' && *++p != '\\' && *p != 'n')
				return fail(c, "an escape in HELP text other than \\\\ or \\n");
		return true;
	}
	if (c->typed)
		return fail(c, "a second TYPE line for a family");
	c->typed = true;
	for (int t = 0; t < MT_N; t++) {
		size_t tn = strlen(mtypes[t].name);
		if (strncmp(p, mtypes[t].name, tn) == 0 && p[tn] == '\n') {
			c->type = (enum mtype)t;
			return true;
		}
	}
	return fail(c, "a type other than counter, gauge, histogram, summary or untyped");
}

/* {name="value",...} at *pp, its labels into lab[]; *pp is moved past the '}'. */
static bool label_set(struct check *c, const char **pp, struct label *lab, size_t *nl)
{
	const char *p = *pp;

	do {
		p++;
		size_t k = name_len(p, false);
		const char *v = p + k + 2;
		if (k == 0 || p[k] != '=' || p[k + 1] != '"')
			return fail(c, "a label not written name=\"value\", or a trailing comma");
		if (p[0] == '_' && p[1] == '_')
			return fail(c, "a label name starting with __ (reserved)");
		for (; *v != '"'; v++) {
			if (*v == '\n')
				return fail(c, "a label value without its closing quote");
			if (*v == '\\' && v[1] != '\\' && v[1] != '"' && v[1] != 'n')
				return fail(
				    c, "an escape in a label value other than \\\\, \\\" or \\n");
			v += *v == '\\';
		}
		if (*nl == LABELS_MAX)
			return fail(c, "too many labels");
		lab[(*nl)++] = (struct label){p, (size_t)(v + 1 - p), k};
		p = v + 1;
	} while (*p == ',');
	if (*p != '}')
		return fail(c, "a label set not closed by }");
	*pp = p + 1;
	return true;
}

static int label_cmp(const void *a, const void *b)
{
	const struct label *x = a, *y = b;
	int d = memcmp(x->p, y->p, x->name_n < y->name_n ? x->name_n : y->name_n);
	return d ? d : (x->name_n > y->name_n) - (x->name_n < y->name_n);
}

/* name[{labels}] value: of the current family, or the first of an untyped one. */
static bool sample(struct check *c, const char *l)
{
	struct label lab[LABELS_MAX];
	size_t n = name_len(l, true), nl = 0, fl;
	const char *p = l + n, *special;
	int sfx;
	bool has_special = false;

	if (n == 0)
		return fail(c, "a line that is neither a sample nor a HELP or TYPE line");
	sfx = suffix_of(c, l, n);
	if (sfx < 0 && c->declared)
		return fail(c, "a sample not of the family its HELP or TYPE line names");
	if (sfx < 0 && !start_family(c, l, n))
		return false;
	sfx = sfx < 0 ? 0 : sfx;
	c->sampled = true;
	if (*p == '{' && !label_set(c, &p, lab, &nl))
		return false;
	if (*p++ != ' ')
		return fail(c, "a sample's name or labels not followed by a space");
	fl = float_len(p);
	if (fl && p[fl] == ' ')
		return fail(c, "a timestamp or more after the value");
	if (!fl || p[fl] != '\n')
		return fail(c, "a value that is not a float (decimal, NaN, +Inf, -Inf)");
	qsort(lab, nl, sizeof(lab[0]), label_cmp);
	special = mtypes[c->type].special;
	for (size_t i = 0; i < nl; i++) {
		const char *v = lab[i].p + lab[i].name_n + 2;
		if (i > 0 && label_cmp(&lab[i - 1], &lab[i]) == 0)
			return fail(c, "a label name twice in one sample");
		if (!special || lab[i].name_n != strlen(special) ||
		    memcmp(lab[i].p, special, lab[i].name_n) != 0)
			continue;
		if (sfx != 0)
			return fail(c, "le or quantile on a _sum or _count sample");
		fl = float_len(v);
		if (!fl || v[fl] != '"' || *v == 'N')
			return fail(c, "an le or quantile that is not a number");
		has_special = true;
	}
	if (special && sfx == 0 && !has_special)
		return fail(
		    c, "a histogram bucket without le, or a summary quantile without quantile");
	/* The series: name{labels in name order}, an empty value being no label at all. */
	put(c, l, n);
	put(c, "{", 1);
	for (size_t i = 0; i < nl; i++)
		if (lab[i].n > lab[i].name_n + 3) {
			put(c, lab[i].p, lab[i].n);
			put(c, ",", 1);
		}
	put(c, "}", 1);
	end_key(c, c->line);
	return true;
}

static int key_cmp(const void *a, const void *b, void *buf)
{
	const struct key *x = a, *y = b;
	const char *keys = buf;
	int d = strcmp(keys + x->off, keys + y->off);
	return d ? d : (x->line > y->line) - (x->line < y->line);
}

bool sup_metrics_text_ok(const char *text, size_t len, const char **why, unsigned *line)
{
	struct check c = {0};

	if (len == 0 || text[len - 1] != '\n')
		fail(&c, "empty, or not ending with a newline");
	for (size_t i = 0; i < len && !c.why;) {
		const char *l = text + i, *nl = memchr(l, '\n', len - i);
		size_t n = (size_t)(nl - l);
		c.line++;
		if (n == 0 || n > LINE_MAX_BYTES)
			fail(&c, n ? "a line over 1024 bytes" : "an empty line");
		for (size_t j = 0; j < n && !c.why; j++)
			if (l[j] < 0x20 || l[j] > 0x7e)
				fail(&c, "a byte that is not printable ASCII");
		if (!c.why && l[0] == '#')
			comment(&c, l);
		else if (!c.why)
			sample(&c, l);
		i += n + 1;
	}
	if (!c.why && end_family(&c)) {
		qsort_r(c.keys, c.nkeys, sizeof(c.keys[0]), key_cmp, c.buf);
		for (size_t i = 1; i < c.nkeys && !c.why; i++) {
			const char *k = c.buf + c.keys[i].off;
			if (strcmp(c.buf + c.keys[i - 1].off, k) == 0)
				fail_at(&c, c.keys[i].line,
				        strchr(k, '{')
				            ? "a series written twice"
				            : "a family in two places, or a name two families "
				              "may write");
		}
	}
	free(c.buf);
	free(c.keys);
	*why = c.why;
	*line = c.bad_line;
	return !c.why;
}
