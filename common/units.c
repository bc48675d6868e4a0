/*
 * Human units: sizes ("1Gi", "512Mi", "1.5G"), for the policy file, the
 * controller's parameters and the tools, and durations ("30s", "500ms") for the
 * tools. Pure functions, nothing fatal, no privilege. Parsing is exact integer arithmetic with
 * overflow checks: a size never silently wraps or loses bytes.
 */
#include "units.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MAX_FRACTION_DIGITS 9

struct unit {
	const char *suffix;
	int64_t mult;
};

/* Longest suffixes first, so "Gi" is not read as "G". */
static const struct unit size_units[] = {
    {"Ki", 1LL << 10},
    {"Mi", 1LL << 20},
    {"Gi", 1LL << 30},
    {"Ti", 1LL << 40},
    {"Pi", 1LL << 50},
    {"Ei", 1LL << 60},
    {"k", 1000LL},
    {"K", 1000LL},
    {"M", 1000LL * 1000},
    {"G", 1000LL * 1000 * 1000},
    {"T", 1000LL * 1000 * 1000 * 1000},
    {"P", 1000LL * 1000 * 1000 * 1000 * 1000},
    {"E", 1000LL * 1000 * 1000 * 1000 * 1000 * 1000},
    {"", 1},
};

/*
 * Reads "<digits>[.<digits>]" from *s: whole part, fraction as an integer and
 * its scale (10^digits). -1 when there is no digit or too many.
 */
static int read_number(const char **s, int64_t *whole, int64_t *frac, int64_t *scale)
{
	const char *p = *s;
	bool any = false;

	*whole = 0;
	*frac = 0;
	*scale = 1;
	while (isdigit((unsigned char)*p)) {
		if (__builtin_mul_overflow(*whole, 10, whole) ||
		    __builtin_add_overflow(*whole, *p - '0', whole))
			return -1;
		p++;
		any = true;
	}
	if (*p == '.') {
		p++;
		int digits = 0;
		while (isdigit((unsigned char)*p)) {
			if (++digits > MAX_FRACTION_DIGITS)
				return -1;
			*frac = *frac * 10 + (*p - '0');
			*scale *= 10;
			p++;
		}
		if (digits == 0)
			return -1;
	}
	if (!any)
		return -1;
	*s = p;
	return 0;
}

/* whole * mult + ceil(frac * mult / scale), or -1 on overflow. */
static int scale_up(int64_t whole, int64_t frac, int64_t scale, int64_t mult, int64_t *out)
{
	int64_t v, part;

	if (__builtin_mul_overflow(whole, mult, &v))
		return -1;
	/* frac < scale <= 10^9 and mult < 2^63: the product fits in 128 bits. */
	__int128 f = (__int128)frac * mult;
	part = (int64_t)((f + scale - 1) / scale);
	if (__builtin_add_overflow(v, part, &v))
		return -1;
	*out = v;
	return 0;
}

int units_parse_size(const char *s, int64_t *out)
{
	int64_t whole, frac, scale;

	if (!s || read_number(&s, &whole, &frac, &scale) != 0)
		return -1;
	for (size_t i = 0; i < sizeof(size_units) / sizeof(size_units[0]); i++) {
		size_t n = strlen(size_units[i].suffix);
		if (strncmp(s, size_units[i].suffix, n) != 0)
			continue;
		const char *rest = s + n;
		if (*rest == 'B')
			rest++;
		if (*rest != '\0')
			continue;
		return scale_up(whole, frac, scale, size_units[i].mult, out);
	}
	return -1;
}

void units_format_size(int64_t bytes, char *buf, size_t len)
{
	static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	int i = 0;
	int64_t unit = 1;

	if (bytes < 1024) {
		snprintf(buf, len, "%lld B", (long long)bytes);
		return;
	}
	while (i < 6 && bytes / unit >= 1024) {
		unit <<= 10;
		i++;
	}
	if (bytes % unit == 0)
		snprintf(buf, len, "%lld %s", (long long)(bytes / unit), names[i]);
	else
		snprintf(buf, len, "%.1f %s", (double)bytes / (double)unit, names[i]);
}

int units_parse_duration_ms(const char *s, int64_t *out_ms)
{
	static const struct unit units[] = {
	    {"ms", 1}, {"s", 1000}, {"m", 60 * 1000L}, {"h", 3600 * 1000L}, {"", 1000},
	};
	int64_t whole, frac, scale;

	if (!s || read_number(&s, &whole, &frac, &scale) != 0)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(s, units[i].suffix) == 0)
			return scale_up(whole, frac, scale, units[i].mult, out_ms);
	}
	return -1;
}
