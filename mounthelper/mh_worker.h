/*
 * Worker processes: every request that changes something runs in its own
 * forked worker, so a slow one (mkfs, a copy, an online resize) never delays
 * requests about other volumes (mh_worker.c).
 */
#ifndef SEPCSI_MH_WORKER_H
#define SEPCSI_MH_WORKER_H

#include <poll.h>
#include <stddef.h>

#include "mh.h"

#define MH_WORKERS_MAX 16 /* operations in flight at once; more are answered BUSY */

/*
 * Run req (a known, state-changing request) in a new worker that answers on
 * peer itself; or, if it shares an id or a path with a request in flight, or
 * too many are in flight, answer MH_E_BUSY at once. Never blocks on the work.
 * ctl (the supervisor's channel, or -1) is closed in the worker.
 */
void mh_worker_start(const struct mh_ctx *c, const struct mh_msg *req, int peer, int ctl);

/* Fill p with one pollfd per worker (POLLIN: it answered or ended); returns how many. */
size_t mh_workers_pollfds(struct pollfd *p, size_t max);

/*
 * Note every worker that has answered (its ids are free again) and reap every
 * one that has exited; never blocks on a running one. Call it before reading
 * each request. A worker that died without answering (killed, crashed) is
 * answered for on peer (if >= 0) with MH_E_FAILED.
 */
void mh_workers_reap(const struct mh_ctx *c, int peer);

/* What a worker tells the main loop on its pipe (mh_worker_note). */
#define MH_NOTE_DONE   'D' /* the answer follows: the request's ids are free */
#define MH_NOTE_FROZEN 'F' /* a source file system is frozen for a copy */
#define MH_NOTE_THAWED 'T' /* and thawed again */

/* In a worker: tell the main loop (no-op in the main process). */
void mh_worker_note(char what);

/* Milliseconds until the next freeze runs out (for the main loop's wait), or -1 for none. */
int mh_workers_timeout_ms(const struct mh_ctx *c);

/* Kill every worker whose freeze has run out and thaw its source (reaped as usual). */
void mh_workers_enforce(const struct mh_ctx *c);

/* Workers still running. */
size_t mh_workers_count(void);

#endif
