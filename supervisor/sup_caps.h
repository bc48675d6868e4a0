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

/* One capability of the kept table (sup_caps.c says why each). */
struct sup_kept_cap {
	unsigned cap;
	bool effective; /* used by the supervisor itself */
	const char *why;
	bool optional; /* kept when the supervisor was started with it, not required */
};

/* The kept table, whatever sup_caps_trim() found: for the printed tables (sup_privtab.c). */
const struct sup_kept_cap *sup_caps_table(size_t *n);

#endif
