/*
 * Inside the policy module (policy.c, policy_load.c): the parsed policy and
 * the helpers both halves use. Not for other modules: they see policy.h.
 */
#ifndef SEPCSI_POL_INT_H
#define SEPCSI_POL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

struct pol_list {
	char *v[POL_OPTS_MAX];
	size_t n, cap;
};

/* mkfs option lists, one per known fs type (same order as pol_fs_types). */
#define POL_NFS 3

struct pol {
	struct pol_list roots, fstypes, opts;
	struct pol_list bases;            /* [directories] base_dirs and shared_base_dirs */
	uint32_t shared_bases;            /* bit i: bases.v[i] is a shared base */
	struct pol_list staging, targets; /* path patterns, relative to each root */
	struct pol_list mkfs[POL_NFS];
	uint64_t min_bytes, max_bytes;
	unsigned overcommit_pct, freeze_max_s;
	bool log_only;
	/* The compiled form only: the core's confinement (compiled.c). */
	uint64_t core_caps, core_caps_optional;
	uint8_t *filter[POL_FILTERS];
	size_t filter_len[POL_FILTERS];
};

#define TABLE_LEN(t) (sizeof(t) / sizeof((t)[0]))

/* vsnprintf into err, if there is one. */
void pol_seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* id is prefix ("sv-", "ss-", "gs-") followed by 32 lowercase hex digits. */
bool pol_id_valid(const char *id, const char *prefix);
/* strdup that aborts on allocation failure (error-handling contract). */
char *pol_xstrdup(const char *s);
/* FNV-1a, 32 bits: the compiled confinement arrived whole (not a proof against a forger). */
uint32_t pol_hash(const void *buf, size_t len);
/* The compiled form (compiled.c): its first bytes, and the longest entry it carries. */
#define POL_COMPILED_MAGIC "SEPCSIPOL3\n" /* 2: the core's confinement; 3: its reader's filter */
#define POL_ENTRY_MAX      4096
/* The i-th list of p in the compiled form's order; NULL past the last. */
struct pol_list *pol_list_at(struct pol *p, size_t i);

/* Free every entry of the list; it is empty afterwards. */
void pol_list_clear(struct pol_list *l);
/* Does the list hold the n bytes at s as one whole entry? */
bool pol_list_has(const struct pol_list *l, const char *s, size_t n);
/* A path pattern, a mount option entry, an mkfs word, as the file may give them. */
bool pol_mkfs_word_ok(const char *w, size_t n);

#endif
