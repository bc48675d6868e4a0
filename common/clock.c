/* The monotonic clock in milliseconds (clock.h). Nothing here is fatal. */
#include "clock.h"

#include <time.h>

int64_t mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}
