/* The capable core's own rows and what its loop asks of them (core_freeze.c). */
#ifndef SEPCSI_CORE_H
#define SEPCSI_CORE_H

#include <stdbool.h>

#include "mh_ops.h"

mh_answer_fn core_answer_freeze, core_answer_thaw;

/* Thaw volume_id if the core froze it (before its unmount, which would wait for the thaw). */
void core_thaw_volume(const char *volume_id);
/* Milliseconds until the nearest freeze runs out (0: one has), -1 when nothing is frozen. */
int core_freeze_wait_ms(void);
/* Thaw every freeze that has run out; with all, every one (the core is ending). */
void core_freeze_expire(bool all);

#endif
