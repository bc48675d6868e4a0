/*
 * Unit test of the client tools' human units: sizes, durations and the gRPC
 * status names. Runs as its own process under CTest; a failed check prints
 * the input and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csic.h"

static int failures;

static void size_ok(const char *s, int64_t want)
{
	int64_t got = -1;

	if (units_parse_size(s, &got) != 0 || got != want) {
		fprintf(stderr, "parse_size(%s) = %lld, want %lld\n", s, (long long)got,
		        (long long)want);
		failures++;
	}
}

static void size_bad(const char *s)
{
	int64_t got;

	if (units_parse_size(s, &got) == 0) {
		fprintf(stderr, "parse_size(%s) accepted (%lld)\n", s, (long long)got);
		failures++;
	}
}

static void duration_ok(const char *s, int64_t want_ms)
{
	int64_t got = -1;

	if (units_parse_duration_ms(s, &got) != 0 || got != want_ms) {
		fprintf(stderr, "parse_duration(%s) = %lld, want %lld\n", s, (long long)got,
		        (long long)want_ms);
		failures++;
	}
}

static void duration_bad(const char *s)
{
	int64_t got;

	if (units_parse_duration_ms(s, &got) == 0) {
		fprintf(stderr, "parse_duration(%s) accepted\n", s);
		failures++;
	}
}

static void format_is(int64_t bytes, const char *want)
{
	char buf[32];

	units_format_size(bytes, buf, sizeof(buf));
	if (strcmp(buf, want) != 0) {
		fprintf(stderr, "format_size(%lld) = '%s', want '%s'\n", (long long)bytes, buf,
		        want);
		failures++;
	}
}

int main(void)
{
	size_ok("0", 0);
	size_ok("4096", 4096);
	size_ok("1Ki", 1024);
	size_ok("512Mi", 512LL << 20);
	size_ok("1Gi", 1LL << 30);
	size_ok("1GiB", 1LL << 30);
	size_ok("1G", 1000000000);
	size_ok("1k", 1000);
	size_ok("1K", 1000);
	size_ok("2T", 2000000000000LL);
	size_ok("1.5Gi", 3LL << 29);
	size_ok("1.5Ki", 1536);
	size_ok("0.1", 1); /* a fraction of a byte rounds up */
	size_ok("1.0001k", 1001);
	size_ok("7Ei", 7LL << 60);
	size_ok("9223372036854775807", INT64_MAX);
	size_bad("");
	size_bad("Gi");
	size_bad("-1");
	size_bad("1 Gi");
	size_bad("1Gx");
	size_bad("1gi");
	size_bad("8Ei");
	size_bad("9223372036854775808");
	size_bad("1.");
	size_bad(".");
	size_bad("1.0000000001");

	duration_ok("30s", 30000);
	duration_ok("30", 30000);
	duration_ok("500ms", 500);
	duration_ok("2m", 120000);
	duration_ok("1h", 3600000);
	duration_ok("1.5s", 1500);
	duration_bad("s");
	duration_bad("10x");
	duration_bad("-1s");

	format_is(0, "0 B");
	format_is(1023, "1023 B");
	format_is(1024, "1 KiB");
	format_is(1536, "1.5 KiB");
	format_is(64LL << 20, "64 MiB");
	format_is(1LL << 30, "1 GiB");
	format_is(3LL << 29, "1.5 GiB");

	if (strcmp(csic_code_name(0), "OK") != 0 || strcmp(csic_code_name(5), "NOT_FOUND") != 0 ||
	    strcmp(csic_code_name(16), "UNAUTHENTICATED") != 0 ||
	    strcmp(csic_code_name(17), "CODE_17") != 0 ||
	    strcmp(csic_code_name(-1), "CODE_-1") != 0) {
		fprintf(stderr, "csic_code_name\n");
		failures++;
	}
	if (failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
