/* The monotonic clock in milliseconds, for deadlines and rates in every process (clock.c). */
#ifndef SEPCSI_CLOCK_H
#define SEPCSI_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
int64_t mono_ms(void);

#endif
