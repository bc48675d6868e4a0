/*
 * The policy in compiled form: what a loaded policy holds, as a flat binary
 * record, for a process that must not link the policy file's parser (the
 * capable core). pol_compile writes it (policy_load.c, beside the parser,
 * for the program that compiles: tools/policy/policy_main.c);
 * pol_load_compiled reads it (here).
 *
 *   "SEPCSIPOL3\n"
 *   9 lists, in the order of struct pol (roots, fstypes, opts, bases, staging,
 *   targets, mkfs ext4, xfs, btrfs): u8 count, then each entry u16 length and
 *   its bytes (no NUL);
 *   u64 min_bytes, u64 max_bytes, u32 overcommit_pct, u32 freeze_max_s,
 *   u8 log_only;
 *   the core's confinement: u64 its capabilities, u64 those it keeps if
 *   permitted, then its seccomp filter, its flusher's and its reader's
 *   (sepcsi-reader, which loads the record too), each a u16 count of
 *   BPF instructions (1 to 4096) and the instructions (pol_seccomp_export);
 *   u32 the FNV-1a hash of every byte before it; and nothing after.
 * All integers are big-endian. The reader holds each list to its bound and
 * each entry to POL_ENTRY_MAX, the numbers to their ranges, checks the record
 * is whole, its hash right and nothing follows it. What the record says is
 * its compiler's, which wrote it from a policy file its loader checked
 * (paths, file system types, mount options, patterns, bases outside the
 * roots): the reader does not check all that again. The hash makes a record
 * damaged on the way, or a fuzzer's, no start (never a filter no table made,
 * nor a list the loader refused); a record forged whole is its starter's,
 * root, who could start anything. The kernel checks the filters' programs.
 *
 * Pure code, no privilege needed.
 */
#include "pol_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMPILED_MAX (64 * 1024)

struct reader {
	const uint8_t *p, *end;
};

static int get(struct reader *r, uint64_t *v, size_t bytes)
{
	if ((size_t)(r->end - r->p) < bytes)
		return -1;
	for (*v = 0; bytes--; r->p++)
		*v = *v << 8 | *r->p;
	return 0;
}

static int get_list(struct reader *r, struct pol_list *l)
{
	uint64_t n, len;
	if (get(r, &n, 1) < 0 || n > l->cap)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (get(r, &len, 2) < 0 || len > POL_ENTRY_MAX || (size_t)(r->end - r->p) < len ||
		    memchr(r->p, '\0', len))
			return -1;
		char *s = malloc(len + 1);
		if (!s)
			abort();
		memcpy(s, r->p, len);
		s[len] = '\0';
		l->v[l->n++] = s;
		r->p += len;
	}
	return 0;
}

uint32_t pol_hash(const void *buf, size_t len)
{
	uint32_t h = 2166136261u;
	for (const uint8_t *b = buf; len--; b++)
		h = (h ^ *b) * 16777619u;
	return h;
}

/* The confinement: capabilities, three filters. */
static int get_confinement(struct reader *r, struct pol *p)
{
	uint64_t n;
	if (get(r, &p->core_caps, 8) < 0 || get(r, &p->core_caps_optional, 8) < 0)
		return -1;
	for (size_t i = 0; i < POL_FILTERS; i++) {
		if (get(r, &n, 2) < 0 || n == 0 || n > 4096 || (size_t)(r->end - r->p) < n * 8)
			return -1;
		if (!(p->filter[i] = malloc(n * 8)))
			abort();
		memcpy(p->filter[i], r->p, n * 8);
		p->filter_len[i] = n * 8;
		r->p += n * 8;
	}
	return 0;
}

void pol_core_caps(const struct pol *p, uint64_t *caps, uint64_t *optional)
{
	*caps = p->core_caps;
	*optional = p->core_caps_optional;
}

const void *pol_core_filter(const struct pol *p, enum pol_filter which, size_t *len)
{
	*len = p->filter_len[which];
	return p->filter[which];
}

int pol_load_compiled(int fd, struct pol **out, char *err, size_t errlen)
{
	static uint8_t buf[COMPILED_MAX + 1];
	size_t len = 0;
	ssize_t n;
	*out = NULL;
	while ((n = read(fd, buf + len, sizeof(buf) - len)) > 0 && len + (size_t)n < sizeof(buf))
		len += (size_t)n;
	if (n < 0 || n > 0) {
		pol_seterr(err, errlen, "compiled policy: %s",
		           n < 0 ? strerror(errno) : "too large");
		return -1;
	}
	struct pol *p = calloc(1, sizeof(*p));
	if (!p)
		abort();
	const size_t caps[] = {POL_ROOTS_MAX, POL_FSTYPES_MAX,  POL_OPTS_MAX,
	                       POL_BASES_MAX, POL_PATTERNS_MAX, POL_PATTERNS_MAX,
	                       POL_OPTS_MAX,  POL_OPTS_MAX,     POL_OPTS_MAX};
	struct reader r = {buf, buf + len};
	uint64_t min, max, pct, freeze, log_only, hash;
	size_t magic = strlen(POL_COMPILED_MAGIC);
	int ok = len >= magic && memcmp(buf, POL_COMPILED_MAGIC, magic) == 0;
	if (ok)
		r.p += magic;
	for (size_t i = 0; ok && pol_list_at(p, i); i++) {
		pol_list_at(p, i)->cap = caps[i];
		ok = get_list(&r, pol_list_at(p, i)) == 0;
	}
	ok = ok && get(&r, &min, 8) == 0 && get(&r, &max, 8) == 0 && get(&r, &pct, 4) == 0 &&
	     get(&r, &freeze, 4) == 0 && get(&r, &log_only, 1) == 0 && get_confinement(&r, p) == 0;
	size_t hashed = (size_t)(r.p - buf);
	ok = ok && get(&r, &hash, 4) == 0 && hash == pol_hash(buf, hashed) && r.p == r.end &&
	     log_only <= 1 && min >= 4096 && min <= max && max <= (uint64_t)INT64_MAX / 2 &&
	     freeze >= 1 && freeze <= 3600 && pct >= 1 && pct <= 10000;
	if (!ok) {
		pol_seterr(err, errlen, "compiled policy: malformed");
		pol_free(p);
		return -1;
	}
	p->min_bytes = min;
	p->max_bytes = max;
	p->overcommit_pct = (unsigned)pct;
	p->freeze_max_s = (unsigned)freeze;
	p->log_only = log_only == 1;
	*out = p;
	return 0;
}
