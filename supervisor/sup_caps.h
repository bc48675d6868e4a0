/*
 * Capabilities of the supervisor and of the children it spawns: what the
 * supervisor keeps for itself (and therefore the most the helper can ever
 * get), and the raw reads and drops the rpcd child uses to end up with none.
 */
#ifndef SEPCSI_SUP_CAPS_H
#define SEPCSI_SUP_CAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One process's capability sets as bit masks (bit n = capability n). */
struct sup_capsets {
	uint64_t effective, permitted, inheritable, bounding, ambient;
};

/* Read the calling thread's five sets from the kernel; 0 or -1 with errno. */
int sup_caps_read(struct sup_capsets *out);

/* Drop every capability from the bounding set (needs CAP_SETPCAP); 0 or -1. */
int sup_caps_drop_bounding(void);

/* Empty the effective, permitted and inheritable sets; 0 or -1. */
int sup_caps_clear(void);

/*
 * Trim the supervisor to the kept set (see sup_caps.c for why each one),
 * clear inheritable and ambient, set no_new_privs, and verify the result.
 * On failure err says what is missing or what failed; the caller exits.
 */
int sup_caps_trim(char *err, size_t errlen);

/* The masks sup_caps_trim() leaves, for tests and the log. */
uint64_t sup_caps_kept_permitted(void);
uint64_t sup_caps_kept_effective(void);

/*
 * The kept table as masks, whatever sup_caps_trim() found: effective;
 * permitted only (held for the helper); and, overlapping those, the optional
 * ones (kept only when the supervisor starts with them).
 */
void sup_caps_table_masks(uint64_t *effective, uint64_t *permitted_only, uint64_t *optional);

/*
 * What sup_caps_trim() would keep in this process (optional capabilities
 * counted if its bounding set has them): for --print-privileges.
 */
void sup_caps_expected(uint64_t *effective, uint64_t *permitted);

/*
 * Entry i of the kept table (for the printed tables, sup_privtab.c): false
 * past its end.
 */
bool sup_caps_entry(size_t i, unsigned *cap, bool *effective, const char **why);

#endif
