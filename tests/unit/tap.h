/* Minimal assertion helpers for the C unit tests: each test binary is one process. */
#ifndef SEPCSI_TEST_TAP_H
#define SEPCSI_TEST_TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int tap_failures;
static int tap_count;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		tap_count++;                                                                       \
		if (!(cond)) {                                                                     \
			tap_failures++;                                                            \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
		}                                                                                  \
	} while (0)

/* A pause between two looks at something another thread or process brings about. */
static inline void tap_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, ms % 1000 * 1000000};
	nanosleep(&ts, NULL);
}

/* Call at the end of main: prints a summary and returns the exit status. */
static inline int tap_done(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, tap_count, tap_failures);
	return tap_failures ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
