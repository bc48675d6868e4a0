/*
 * Worker processes: every request that changes something runs in a worker
 * of its own for its duration (a pool of forked processes), so a slow one
 * (mkfs, a copy, an online resize) never delays requests about other volumes
 * (mh_worker.c).
 */
#ifndef SEPCSI_MH_WORKER_H
#define SEPCSI_MH_WORKER_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#include "mh.h"

#define MH_WORKERS_MAX 16 /* operations in flight at once; more are answered BUSY */
/* Of them, reads of snapshot images (BLOCKS): a burst of backups leaves the rest to volumes. */
#define MH_WORKERS_BLOCKS 4

/*
 * Zeroed memory of the main loop's own that no worker inherits (MADV_DONTFORK):
 * for its large buffers, which a worker must neither see nor keep a copy of.
 * Start-up failure is fatal.
 */
void *mh_main_only(size_t size);

/* The main loop's buffers for the workers; once, before the first request. */
void mh_workers_init(void);

/*
 * Run req (a known, state-changing request, asked on channel generation gen)
 * in an idle worker, or in a new one; or, if it shares an id or a path with a
 * request in flight, or too many are in flight, answer MH_E_BUSY on peer at
 * once. Never blocks on the work. A new worker gets neither peer nor ctl (the
 * supervisor's channel, or -1): it answers to the main loop, which forwards it.
 */
void mh_worker_start(const struct mh_ctx *c, const struct mh_msg *req, int peer, uint32_t gen,
                     int ctl);

/*
 * Look at what dead operations left (the names only: temporary files in the
 * data directory, ids in the bases' work and trash areas), to be purged in
 * workers (mh_workers_purge); replaces what an earlier look found. After
 * start, and after a worker's death.
 */
void mh_workers_find_leftovers(const struct mh_ctx *c);

/*
 * Give the next leftover to a worker (PURGE, answered to nobody), if none
 * is purging now and a worker is free. Call it each time round the main loop.
 */
void mh_workers_purge(const struct mh_ctx *c);

/* Fill p with one pollfd per worker (POLLIN: it noted, answered or ended); returns how many. */
size_t mh_workers_pollfds(struct pollfd *p, size_t max);

/*
 * Read what the workers sent, and reap every one that has exited; never
 * blocks on a running one. Call it before reading each request, with the
 * pollfds of mh_workers_pollfds() as poll() returned them: only a worker
 * whose fd has an event is read. An answer (or, for a worker that died with
 * a request in flight, MH_E_FAILED) goes out on peer as it arrives if its
 * request was asked on generation gen, the current one; else nowhere.
 */
void mh_workers_reap(const struct mh_ctx *c, int peer, uint32_t gen, const struct pollfd *p,
                     size_t n);

/* Does a worker in flight hold this key (an id or a path, mh_ops_keys)? */
bool mh_workers_hold(const char *key);

/* What a worker tells the main loop besides its answer (mh_worker_note). */
#define MH_NOTE_FROZEN 'F' /* a source file system is frozen for a copy */
#define MH_NOTE_THAWED 'T' /* and thawed again */
#define MH_NOTE_HELD   'H' /* tests: held at "answered" after the answer that follows */
#define MH_NOTE_READY  'R' /* tests: no longer held, it waits for its next request */
#define MH_NOTE_CORE   'C' /* followed by a request for the capable core, relayed */

/*
 * The capable core (sepcsi-core) on core and its reader (sepcsi-reader: STATS
 * and LIST of mounts) on reader, which the main loop relays its workers'
 * questions to (mh_core_ask), each under an id of its own; -1, -1 without.
 */
enum { MH_CHAN_CORE, MH_CHAN_READER, MH_CHANS };
void mh_workers_set_core(int core, int reader);
/*
 * Find sepcsi-core and sepcsi-reader beside the helper's binary (root's, only
 * root may write them), before the view, which does not show them; fatal if
 * it cannot.
 */
void mh_core_locate(void);
/*
 * Then start it as the helper's child, in a view of its own built from inside
 * the helper's (mh_view_enter in the child, before its exec), the policy
 * compiled on its fd 5 and its channel on fd 3: the channel's other end; and
 * its reader and flusher, forked in that view before the core's exec, without
 * any capability: the reader's channel's other end in *reader. Both take the
 * owner of images/ (the helper's own identity) for the images' owner. Before
 * the helper's confinement; fatal if it cannot.
 */
struct pol;
int mh_core_start(const struct pol *pol, const char *data_dir, const char *fmt, const char *lvl,
                  bool direct_io, int *reader);
/* Channel chan's fd, for the main loop's wait; -1 without one. */
int mh_workers_core_fd(int chan);
/* In the main loop: one answer on channel chan, to the worker that asked. */
void mh_workers_core_answer(int chan);
/* Questions wait for channel chan (poll it for POLLOUT)? */
bool mh_workers_core_waiting(int chan);
/* Send what waits for chan, as far as the channel takes it without blocking. */
void mh_workers_core_send(int chan);
/*
 * In a worker: ask the core req and wait for its answer. 0 with *ans (the
 * core's answer, of req's answer type, id as asked), or -1 with r (its error,
 * an answer of another type, or a failure to ask).
 */
int mh_core_ask(const struct mh_msg *req, struct mh_msg *ans, struct mh_res *r);

/* In a worker: tell the main loop (no-op in the main process). */
void mh_worker_note(char what);

/*
 * Milliseconds until the next freeze runs out or an idle worker has waited
 * long enough to end (for the main loop's wait), or -1 for none.
 */
int mh_workers_timeout_ms(const struct mh_ctx *c);

/*
 * Kill every worker whose freeze has run out and thaw its source, and end the
 * workers idle for too long (all reaped as usual).
 */
void mh_workers_enforce(const struct mh_ctx *c);

/* Workers alive (in a request or idle). */
size_t mh_workers_count(void);

/* Have every worker end once it has answered what it is doing (at stop). */
void mh_workers_end_all(void);

#endif
