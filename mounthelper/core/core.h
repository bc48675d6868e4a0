/* The capable core's own rows and what its loop asks of them (core_freeze.c). */
#ifndef SEPCSI_CORE_H
#define SEPCSI_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "mh_ops.h"
#include "pol_sc_load.h"

mh_answer_fn core_answer_freeze, core_answer_thaw;

/*
 * Its compiled policy (policy/compiled.c), its images directory and its
 * audit.log (append), as its starter opened them (mh_relay.c).
 */
#define CORE_FD_POLICY 5
#define CORE_FD_IMAGES 7
#define CORE_FD_AUDIT  8

/*
 * Start the thread that thaws each freeze at its deadline (at start, before
 * the filter, which it shares): 0, or -1 with errno.
 */
int core_freeze_init(void);
/* Has the core frozen volume_id? */
bool core_frozen(const char *volume_id);
/*
 * Thaw volume_id if the core froze it: before its unmount or its growth, which
 * would wait for the thaw. why goes to the log. Whether it was frozen.
 */
bool core_thaw_volume(const char *volume_id, const char *why);
/* Thaw every freeze (the core is ending). */
void core_thaw_all(void);

/*
 * The flusher (core_flush.c; sepcsi-reader --flusher): a process without
 * capabilities, started beside the core by its starter, that writes back a
 * volume's file system when its peer asks FLUSH (before UNSTAGE and FREEZE),
 * so that the core's one thread does not wait for it. Its socket is at
 * CORE_FD_FLUSH.
 */
#define CORE_FD_FLUSH POL_SC_FLUSH_FD
/* Find it (at start): 0, or -1 with errno (no flusher: the core writes back itself). */
int core_flush_init(void);
/* The socket to wait on for its answers; -1 when there is no flusher. */
int core_flush_fd(void);
/*
 * Hand the flusher the file system of volume_id, if the core's own loop
 * device of that volume's image has one mounted and it is not frozen; true
 * when it was sent, and FLUSH request id is then answered once it is done.
 */
bool core_flush_begin(const struct mh_ctx *c, const char *volume_id, uint32_t id);
/* Is a FLUSH of volume_id held by the flusher (handed over, not answered yet)? */
bool core_flush_holds(const char *volume_id);
/*
 * A FLUSH to answer now: 1 with its request id (its write-back done, or the
 * flusher gone, leaving it to the request that follows), 0 when none is.
 */
int core_flush_done(uint32_t *id);

#endif
