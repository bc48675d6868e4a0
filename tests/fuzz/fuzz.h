/*
 * What every fuzz harness shares: the two entry points libFuzzer (or
 * replay.c) calls, and the check that ends the run when an invariant breaks.
 * A harness returns 0 for any input; a broken invariant is a crash, so the
 * fuzzer keeps the input that caused it.
 */
#ifndef SEPCSI_FUZZ_H
#define SEPCSI_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional: once, before the first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__,       \
			        #cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#endif
