/*
 * Loading the policy file (inih) into a struct pol, over the defaults below;
 * the queries are policy.c.
 *
 * Runs in the helper, as root, before confinement. Nothing here is fatal: a
 * broken file is reported to the caller (file:line: reason), who refuses to
 * start.
 */
#include "policy_all.h"

#include <errno.h>
#include <ini.h>
#include <libmount/libmount.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mh_limits.h"
#include "pol_caps.h"
#include "pol_int.h"
#include "pol_seccomp.h"
#include "units.h"

#define MiB          (1024ULL * 1024)
#define TiB          (1024ULL * 1024 * 1024 * 1024)
#define POL_FILE_MAX 65536 /* a policy file is a few hundred bytes */
#define POL_LINE_MAX 190   /* below inih's INI_MAX_LINE (200), see reader() */

static const char *const default_roots[] = {"/var/lib/kubelet"};

static bool pol_in_table(const char *const *t, size_t n, const char *s, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(t[i]) == len && memcmp(t[i], s, len) == 0)
			return true;
	return false;
}

/*
 * Kubelet's own CSI directories and nothing else of its tree: a volume is
 * staged at plugins/kubernetes.io/csi/<driver or "pv">/<hash or pv>/globalmount
 * (raw block: plugins/kubernetes.io/csi/volumeDevices/staging/<pv>) and
 * published at pods/<pod uid>/volumes/kubernetes.io~csi/<pv>/mount (raw block:
 * plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<pod uid>).
 */
static const char *const default_staging[] = {
    "plugins/kubernetes.io/csi/*/*/globalmount",
    "plugins/kubernetes.io/csi/volumeDevices/staging/*",
};
static const char *const default_targets[] = {
    "pods/*/volumes/kubernetes.io~csi/*/*",
    "plugins/kubernetes.io/csi/volumeDevices/publish/*/*",
};

/*
 * Default mkfs options: a small set that changes only how a file system is
 * laid out inside its own image, never what the tool reads or writes outside
 * it (no -d/-p populate-from-directory, no -E root_owner, no journal device).
 *   ext4: reserved blocks 0/1/5 %, 4 KiB blocks, lazy inode table and journal
 *         initialisation, no discard at mkfs, no journal.
 *   xfs:  no discard at mkfs (-K), reflink on or off, big timestamps.
 *   btrfs: no discard at mkfs (-K), single or dup metadata, single data.
 */
static const char *const default_mkfs[POL_NFS][8] = {
    {"-m0", "-m1", "-m5", "-b4096", "-Elazy_itable_init=1,lazy_journal_init=1", "-Enodiscard",
     "-O^has_journal", NULL},
    {"-K", "-mreflink=0", "-mreflink=1", "-mbigtime=1", NULL},
    {"-K", "-msingle", "-mdup", "-dsingle", NULL},
};
static const char *const default_opts[] = {
    "ro",     "rw",   "noatime", "relatime", "nodiratime", "lazytime",
    "noexec", "sync", "dirsync", "discard",  "nodiscard",  "nouuid",
};

static int list_add(struct pol_list *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return 0; /* duplicates are harmless; keep one */
	if (l->n >= l->cap)
		return -1;
	l->v[l->n++] = pol_xstrdup(s);
	return 0;
}

/* ---- loading ------------------------------------------------------------ */

enum key_id {
	K_ROOTS,
	K_STAGING,
	K_TARGETS,
	K_TYPES,
	K_OPTS,
	K_MKFS_EXT4,
	K_MKFS_XFS,
	K_MKFS_BTRFS,
	K_MIN,
	K_MAX,
	K_OVERCOMMIT,
	K_FREEZE,
	K_LOG_ONLY,
	K_BASES,
	K_SHARED,
	K_COUNT
};

static const struct {
	const char *section, *name;
	bool is_list; /* list keys may repeat (or continue on indented lines) and append */
} keys[K_COUNT] = {
    [K_ROOTS] = {"paths", "allowed_roots", true},
    [K_STAGING] = {"paths", "staging_paths", true},
    [K_TARGETS] = {"paths", "target_paths", true},
    [K_TYPES] = {"filesystems", "types", true},
    [K_OPTS] = {"filesystems", "mount_options", true},
    [K_MKFS_EXT4] = {"filesystems", "mkfs_options_ext4", true},
    [K_MKFS_XFS] = {"filesystems", "mkfs_options_xfs", true},
    [K_MKFS_BTRFS] = {"filesystems", "mkfs_options_btrfs", true},
    [K_MIN] = {"volumes", "min_bytes", false},
    [K_MAX] = {"volumes", "max_bytes", false},
    [K_OVERCOMMIT] = {"volumes", "overcommit_ratio", false},
    [K_FREEZE] = {"volumes", "freeze_max_seconds", false},
    [K_LOG_ONLY] = {"seccomp", "log_only", false},
    [K_BASES] = {"directories", "base_dirs", true},
    [K_SHARED] = {"directories", "shared_base_dirs", true},
};

struct loader {
	struct pol *p;
	/* reader state: the file in memory and the line being parsed */
	const char *pos, *end;
	int lineno;
	bool seen[K_COUNT];
	int err_line; /* first error we found, 0 if none */
	char err[256];
};

static void fail(struct loader *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct loader *ld, const char *fmt, ...)
{
	va_list ap;
	if (ld->err_line)
		return; /* keep the first error only */
	ld->err_line = ld->lineno;
	va_start(ap, fmt);
	vsnprintf(ld->err, sizeof(ld->err), fmt, ap);
	va_end(ap);
}

static bool known_section(const char *s, size_t n)
{
	for (size_t i = 0; i < K_COUNT; i++)
		if (strlen(keys[i].section) == n && memcmp(keys[i].section, s, n) == 0)
			return true;
	return false;
}

/*
 * inih line reader over the in-memory file. It counts lines for error
 * messages, refuses over-long lines (inih would silently split them and parse
 * the rest as a continuation line), strips inline comments and checks section
 * names so that an empty unknown section is an error too.
 */
static char *reader(char *str, int num, void *stream)
{
	struct loader *ld = stream;
	if (ld->pos >= ld->end)
		return NULL;
	const char *nl = memchr(ld->pos, '\n', (size_t)(ld->end - ld->pos));
	size_t n = nl ? (size_t)(nl - ld->pos) + 1 : (size_t)(ld->end - ld->pos);
	ld->lineno++;
	if (n > POL_LINE_MAX || (int)n >= num) {
		fail(ld, "line longer than %d characters (split lists over several lines)",
		     POL_LINE_MAX);
		n = 0; /* hand inih an empty line; the load fails anyway */
	}
	memcpy(str, ld->pos, n);
	str[n] = '\0';
	ld->pos += nl ? (size_t)(nl - ld->pos) + 1 : (size_t)(ld->end - ld->pos);
	/*
	 * Cut an inline comment (" ;" or "\t;") here, for every line: inih does
	 * it for "key = value" lines but not for indented continuation lines,
	 * where the comment's words would otherwise become list entries.
	 */
	for (char *c = str + 1; *c; c++) {
		if (*c == ';' && (c[-1] == ' ' || c[-1] == '\t')) {
			c[0] = '\n';
			c[1] = '\0';
			break;
		}
	}
	const char *s = str + strspn(str, " \t");
	if (*s == '[') {
		size_t sl = strcspn(s + 1, "]");
		if (s[1 + sl] == ']' && !known_section(s + 1, sl))
			fail(ld, "unknown section [%.*s]", (int)sl, s + 1);
	}
	return str;
}

/* Sizes: decimal digits, optionally followed by Ki, Mi, Gi or Ti (powers of 1024). */
static int parse_size(const char *v, uint64_t *out)
{
	int64_t n;
	if (units_parse_size(v, &n) != 0)
		return -1;
	*out = (uint64_t)n; /* never negative: the parser takes no sign */
	return 0;
}

/* A ratio "N", "N.D" or "N.DD" from 0.01 to 100, as a percentage. */
static int parse_ratio(const char *v, unsigned *pct)
{
	unsigned whole = 0, frac = 0;
	const char *s = v;
	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++)
		if ((whole = whole * 10 + (unsigned)(*s - '0')) > 100)
			return -1;
	if (*s == '.') {
		unsigned digits = 0;
		for (s++; *s >= '0' && *s <= '9' && digits < 2; s++, digits++)
			frac = frac * 10 + (unsigned)(*s - '0');
		if (digits == 0)
			return -1;
		if (digits == 1)
			frac *= 10;
	}
	if (*s || whole * 100 + frac < 1 || whole * 100 + frac > 10000)
		return -1;
	*pct = whole * 100 + frac;
	return 0;
}

static struct pol_list *key_list(struct pol *p, enum key_id k)
{
	if (k >= K_MKFS_EXT4 && k <= K_MKFS_BTRFS)
		return &p->mkfs[k - K_MKFS_EXT4];
	if (k == K_ROOTS)
		return &p->roots;
	if (k == K_BASES || k == K_SHARED)
		return &p->bases; /* one list: a shared base is a base, flagged (pol_base_shared) */
	if (k == K_STAGING || k == K_TARGETS)
		return k == K_STAGING ? &p->staging : &p->targets;
	return k == K_TYPES ? &p->fstypes : &p->opts;
}

/*
 * A path pattern from the policy: relative, components separated by one '/',
 * none empty, "." or "..", made of letters, digits and ._~@+=:,- only; '*' and
 * '**' only as whole components, '**' only last.
 */
static bool pattern_ok(const char *pat)
{
	const char *c = pat;
	if (!*pat || *pat == '/' || strlen(pat) > MH_PATH_MAX)
		return false;
	for (;;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		bool star = memchr(c, '*', n) != NULL;
		if (star && !(n == 1 || (n == 2 && c[0] == '*' && c[1] == '*')))
			return false;
		if (n == 2 && c[0] == '*' && c[2] != '\0')
			return false; /* '**' only last */
		/* Plain name characters only: nothing the INI syntax or a shell reads specially. */
		for (size_t i = 0; i < n; i++)
			if (!((c[i] >= 'a' && c[i] <= 'z') || (c[i] >= 'A' && c[i] <= 'Z') ||
			      (c[i] >= '0' && c[i] <= '9') || strchr("._~@+=:,*-", c[i])))
				return false;
		if (c[n] == '\0')
			return true;
		c += n + 1;
	}
}

/*
 * Is name (len bytes) an option libmount knows in the given builtin map?
 * Map entries look like "ro", "user[=]", "comment=" or, flagged MNT_PREFIX, "x-".
 */
static bool libmount_knows(int map_id, const char *name, size_t len)
{
	const struct libmnt_optmap *e = mnt_get_builtin_optmap(map_id);
	for (; e && e->name; e++) {
		size_t base = strcspn(e->name, "=[");
		if (len < base || memcmp(e->name, name, base) != 0)
			continue;
		if (len == base || (e->mask & MNT_PREFIX))
			return true;
	}
	return false;
}

/* Validate one allowlist entry from the policy: "name" or "name=". */
static int opt_entry_ok(const char *tok, char *why, size_t whylen)
{
	size_t len = strcspn(tok, "=");
	if (len == 0 || (tok[len] == '=' && tok[len + 1] != '\0')) {
		pol_seterr(why, whylen, "mount option '%s': use 'name' or 'name='", tok);
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		char ch = tok[i];
		if (ch == ',') {
			pol_seterr(why, whylen, "mount option '%s': separate options with spaces",
			           tok);
			return -1;
		}
		/* Option names are plain words: letters, digits, '_', '-', '.'. */
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.')) {
			pol_seterr(why, whylen, "mount option '%s': not a valid option name", tok);
			return -1;
		}
	}
	if (pol_vfs_opt(tok, len) && tok[len] == '\0')
		return 0;
	if (libmount_knows(MNT_LINUX_MAP, tok, len) ||
	    libmount_knows(MNT_USERSPACE_MAP, tok, len)) {
		pol_seterr(why, whylen,
		           "mount option '%s' cannot be allowed (nosuid,nodev are forced; "
		           "bind/remount/propagation/userspace options are never passed)",
		           tok);
		return -1;
	}
	return 0;
}

/* Add each space-separated word of value to the list of key k, validating it. */
static void handle_list(struct loader *ld, enum key_id k, const char *value)
{
	struct pol_list *l = key_list(ld->p, k);
	char word[MH_PATH_MAX + 1], why[200];
	const char *s = value;
	bool any = false;
	for (;;) {
		s += strspn(s, " \t");
		size_t n = strcspn(s, " \t");
		if (n == 0)
			break;
		any = true;
		if (n >= sizeof(word)) {
			fail(ld, "value too long");
			return;
		}
		memcpy(word, s, n);
		word[n] = '\0';
		s += n;
		if (k == K_ROOTS && !pol_path_syntax_ok(word)) {
			fail(ld, "allowed root '%s' is not a canonical absolute path other than /",
			     word);
			return;
		}
		if ((k == K_BASES || k == K_SHARED) && !pol_path_syntax_ok(word)) {
			fail(ld,
			     "base directory '%s' is not a canonical absolute path other than /",
			     word);
			return;
		}
		if ((k == K_BASES || k == K_SHARED) && pol_list_has(l, word, n)) {
			fail(ld,
			     "base directory '%s' is listed twice (base_dirs and shared_base_dirs "
			     "are one list)",
			     word);
			return;
		}
		if ((k == K_STAGING || k == K_TARGETS) && !pattern_ok(word)) {
			fail(ld,
			     "path pattern '%s': relative to each root, no '.', '..' or empty "
			     "component, '*' and '**' only as whole components, '**' only last",
			     word);
			return;
		}
		if (k == K_TYPES && !pol_in_table(pol_fs_types, TABLE_LEN(pol_fs_types), word, n)) {
			fail(ld, "filesystem type '%s' is not supported (ext4, xfs, btrfs)", word);
			return;
		}
		if (k == K_OPTS && opt_entry_ok(word, why, sizeof(why)) < 0) {
			fail(ld, "%s", why);
			return;
		}
		if (k >= K_MKFS_EXT4 && k <= K_MKFS_BTRFS && !pol_mkfs_word_ok(word, n)) {
			fail(ld,
			     "mkfs option '%s': one argument word starting with '-' (write "
			     "'-m0', not '-m 0'), at most 64 printable characters, no quotes",
			     word);
			return;
		}
		if (list_add(l, word) < 0) {
			fail(ld, "too many entries for %s", keys[k].name);
			return;
		}
		if (k == K_SHARED)
			ld->p->shared_bases |= 1u << (l->n - 1);
	}
	if (!any)
		fail(ld, "%s needs at least one value", keys[k].name);
}

/* Always returns 1: errors are recorded by fail() with their line number. */
static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct loader *ld = user;
	enum key_id k;
	for (k = 0; k < K_COUNT; k++)
		if (strcmp(keys[k].section, section) == 0 && strcmp(keys[k].name, name) == 0)
			break;
	if (k == K_COUNT) {
		if (!*section)
			fail(ld, "key '%s' outside a section", name);
		else if (!known_section(section, strlen(section)))
			fail(ld, "unknown section [%s]", section);
		else
			fail(ld, "unknown key '%s' in [%s]", name, section);
		return 1;
	}
	if (keys[k].is_list) {
		if (!ld->seen[k]) {
			/* The file's value replaces the default list; repeats append. The
			 * bases have none, and their two keys fill one list. */
			if (k != K_BASES && k != K_SHARED)
				pol_list_clear(key_list(ld->p, k));
			ld->seen[k] = true;
		}
		handle_list(ld, k, value);
		return 1;
	}
	if (ld->seen[k]) {
		fail(ld, "duplicate key '%s' in [%s]", name, section);
		return 1;
	}
	ld->seen[k] = true;
	if (k == K_LOG_ONLY) {
		if (strcmp(value, "true") == 0)
			ld->p->log_only = true;
		else if (strcmp(value, "false") == 0)
			ld->p->log_only = false;
		else
			fail(ld, "log_only must be true or false");
		return 1;
	}
	if (k == K_OVERCOMMIT) {
		if (parse_ratio(value, &ld->p->overcommit_pct) < 0)
			fail(ld, "overcommit_ratio must be a number from 0.01 to 100 with at most "
			         "two decimals");
		return 1;
	}
	if (k == K_FREEZE) {
		uint64_t sec;
		if (parse_size(value, &sec) < 0 || sec < 1 || sec > 3600)
			fail(ld, "freeze_max_seconds must be a whole number from 1 to 3600");
		else
			ld->p->freeze_max_s = (unsigned)sec;
		return 1;
	}
	uint64_t v;
	if (parse_size(value, &v) < 0) {
		fail(ld, "%s: '%s' is not a size (digits, optional Ki/Mi/Gi/Ti)", name, value);
		return 1;
	}
	if (k == K_MIN)
		ld->p->min_bytes = v;
	else
		ld->p->max_bytes = v;
	return 1;
}

static struct pol *pol_defaults(void)
{
	struct pol *p = calloc(1, sizeof(*p));
	if (!p)
		abort();
	p->roots.cap = POL_ROOTS_MAX;
	p->bases.cap = POL_BASES_MAX;
	p->staging.cap = POL_PATTERNS_MAX;
	p->targets.cap = POL_PATTERNS_MAX;
	for (size_t i = 0; i < TABLE_LEN(default_staging); i++)
		list_add(&p->staging, default_staging[i]);
	for (size_t i = 0; i < TABLE_LEN(default_targets); i++)
		list_add(&p->targets, default_targets[i]);
	p->fstypes.cap = POL_FSTYPES_MAX;
	p->opts.cap = POL_OPTS_MAX;
	for (size_t i = 0; i < POL_NFS; i++) {
		p->mkfs[i].cap = POL_OPTS_MAX;
		for (size_t j = 0; default_mkfs[i][j]; j++)
			list_add(&p->mkfs[i], default_mkfs[i][j]);
	}
	for (size_t i = 0; i < TABLE_LEN(default_roots); i++)
		list_add(&p->roots, default_roots[i]);
	for (size_t i = 0; i < TABLE_LEN(pol_fs_types); i++)
		list_add(&p->fstypes, pol_fs_types[i]);
	for (size_t i = 0; i < TABLE_LEN(default_opts); i++)
		list_add(&p->opts, default_opts[i]);
	p->min_bytes = 1 * MiB;
	p->max_bytes = 16 * TiB;
	p->overcommit_pct = 100;
	p->freeze_max_s = 60;
	p->log_only = false;
	return p;
}

/* Read the whole file into memory, up to one byte more than a policy may have. */
static int slurp(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		pol_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	char *b = malloc(POL_FILE_MAX + 1);
	if (!b)
		abort();
	size_t n = fread(b, 1, POL_FILE_MAX + 1, f);
	int rerr = ferror(f);
	(void)fclose(f);
	if (rerr) {
		pol_seterr(err, errlen, "%s: read error", path);
		free(b);
		return -1;
	}
	*buf = b;
	*len = n;
	return 0;
}

int pol_load_buffer(const char *name, const char *buf, size_t len, struct pol **out, char *err,
                    size_t errlen)
{
	struct pol *p = pol_defaults();
	struct loader ld = {.p = p, .pos = buf, .end = buf + len};
	*out = NULL;
	pol_seterr(err, errlen, "ok");
	if (len > POL_FILE_MAX) {
		pol_seterr(err, errlen, "%s: larger than %d bytes", name, POL_FILE_MAX);
		goto fail;
	}
	if (len > 0 && memchr(buf, '\0', len)) {
		pol_seterr(err, errlen, "%s: contains a NUL byte", name);
		goto fail;
	}
	int rc = ini_parse_stream(reader, &ld, handler, &ld);
	/* rc > 0 is the line of an inih syntax error; ours are in ld.err_line. */
	if (rc != 0 || ld.err_line) {
		if (ld.err_line && (rc <= 0 || rc >= ld.err_line))
			pol_seterr(err, errlen, "%s:%d: %s", name, ld.err_line, ld.err);
		else if (rc > 0)
			pol_seterr(err, errlen,
			           "%s:%d: syntax error (expected [section] or key = value)", name,
			           rc);
		else
			pol_seterr(err, errlen, "%s: cannot parse", name);
		goto fail;
	}
	if (p->min_bytes < 4096 || p->min_bytes > p->max_bytes ||
	    p->max_bytes > (uint64_t)INT64_MAX / 2) {
		pol_seterr(err, errlen,
		           "%s: [volumes] needs 4096 <= min_bytes <= max_bytes <= 2^62", name);
		goto fail;
	}
	for (size_t i = 0; i < p->roots.n; i++) {
		for (size_t j = 0; j < i; j++) {
			if (pol_paths_nested(p->roots.v[i], p->roots.v[j])) {
				pol_seterr(
				    err, errlen,
				    "%s: [paths] allowed roots %s and %s overlap: name the outer "
				    "one alone",
				    name, p->roots.v[j], p->roots.v[i]);
				goto fail;
			}
		}
	}
	for (size_t i = 0; i < p->bases.n; i++) {
		for (size_t j = 0; j < i; j++) {
			if (pol_paths_nested(p->bases.v[i], p->bases.v[j])) {
				pol_seterr(
				    err, errlen,
				    "%s: [directories] base directories %s and %s overlap: a "
				    "volume would lie inside another base's",
				    name, p->bases.v[j], p->bases.v[i]);
				goto fail;
			}
		}
		for (size_t j = 0; j < p->roots.n; j++) {
			if (pol_paths_nested(p->bases.v[i], p->roots.v[j])) {
				pol_seterr(
				    err, errlen,
				    "%s: [directories] base directory %s and allowed root %s "
				    "overlap: volumes must never lie in kubelet's tree",
				    name, p->bases.v[i], p->roots.v[j]);
				goto fail;
			}
		}
	}
	*out = p;
	return 0;
fail:
	pol_free(p);
	return -1;
}

int pol_load(const char *path, struct pol **out, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	*out = NULL;
	pol_seterr(err, errlen, "ok");
	if (!path) {
		*out = pol_defaults();
		return 0;
	}
	if (slurp(path, &buf, &len, err, errlen) < 0)
		return -1;
	int rc = pol_load_buffer(path, buf, len, out, err, errlen);
	free(buf);
	return rc;
}

/* ---- the compiled form (compiled.c says what it is) ---- */

static void put(FILE *f, uint64_t v, size_t bytes)
{
	while (bytes--)
		(void)fputc((int)(v >> (8 * bytes)) & 0xff, f);
}

int pol_compile(const struct pol *p, FILE *out)
{
	struct pol *q = (struct pol *)p; /* list_at only reads through it here */
	char *rec = NULL;
	size_t len = 0;
	FILE *c = open_memstream(&rec, &len);
	if (!c)
		return -1;
	(void)fputs(POL_COMPILED_MAGIC, c);
	int rc = 0;
	for (size_t i = 0; pol_list_at(q, i); i++) {
		const struct pol_list *l = pol_list_at(q, i);
		put(c, l->n, 1);
		for (size_t j = 0; j < l->n; j++) {
			size_t n = strlen(l->v[j]);
			rc = n > POL_ENTRY_MAX ? -1 : rc;
			put(c, n, 2);
			(void)fwrite(l->v[j], 1, n, c);
		}
	}
	put(c, p->min_bytes, 8);
	put(c, p->max_bytes, 8);
	put(c, p->overcommit_pct, 4);
	put(c, p->freeze_max_s, 4);
	put(c, p->log_only, 1);
	/* The core's confinement: what get_confinement reads. */
	put(c, pol_caps_helper_mask(), 8);
	put(c, pol_caps_helper_optional_mask(), 8);
	if (pol_seccomp_export(&pol_sc_core, p->log_only, c) < 0 ||
	    pol_seccomp_export(&pol_sc_flusher, p->log_only, c) < 0 ||
	    pol_seccomp_export(&pol_sc_reader, p->log_only, c) < 0)
		rc = -1;
	if (fclose(c) != 0 || rc < 0) {
		free(rec);
		return -1;
	}
	/* The record, then its hash: a record damaged on the way is refused whole. */
	(void)fwrite(rec, 1, len, out);
	put(out, pol_hash(rec, len), 4);
	free(rec);
	return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}
