/*
 * Human units, one parser for the whole tree: sizes ("1Gi", "512Mi", "1.5G")
 * for the policy file, the controller's parameters and the tools, and
 * durations ("30s", "500ms") for the tools (common/units.c).
 */
#ifndef SEPCSI_UNITS_H
#define SEPCSI_UNITS_H

#include <stddef.h>
#include <stdint.h>

/*
 * Sizes: a non-negative integer or decimal, optionally followed by a suffix:
 * k/K, M, G, T, P, E (powers of 1000) or Ki, Mi, Gi, Ti, Pi, Ei (powers of
 * 1024), with an optional trailing "B" ("1GiB"). "1Gi", "512Mi", "1.5G", "4096".
 * Fractions are rounded up to a whole byte. 0 on success, -1 on bad syntax or
 * a value above INT64_MAX.
 */
int units_parse_size(const char *s, int64_t *out);
/* "1 GiB", "1.5 GiB", "512 MiB", "100 B": exact binary units when they fit, else 1 decimal. */
void units_format_size(int64_t bytes, char *buf, size_t len);

/*
 * Durations: a number with an optional unit ms, s, m or h; no unit means
 * seconds. "30s", "500ms", "2m", "1.5s". 0 on success, -1 otherwise.
 */
int units_parse_duration_ms(const char *s, int64_t *out_ms);

#endif
