/*
 * Concurrency of the helper: a pool of forked workers, each running one
 * state-changing request at a time.
 *
 * Why processes, not threads: a worker inherits the helper's confinement as
 * it is (capabilities, no_new_privs, the seccomp filter; fork does not widen
 * any of them), shares no memory with the main loop or other workers, and a
 * crash or a kill takes down one operation, not the helper. Every worker sets
 * PR_SET_PDEATHSIG(SIGKILL) first, so a killed helper leaves no worker behind
 * holding a loop device, a mount fd or a frozen file system's fd; the tools a
 * worker runs do the same (mh_mkfs.c).
 *
 * Why a pool, not a fork per request: a fork, exit and wait of the helper
 * cost more than the kernel work of most requests (docs/benchmarks.md,
 * "Worker pool"). What a fresh process gave each request, a worker now
 * restores itself between requests: before it answers, it closes every
 * descriptor the request opened (close_range above the ones it started with)
 * and returns to the root directory, so when rpcd reads an answer, nothing of
 * the request is held open (a mount it just made is not kept busy by its own
 * maker when the next request unmounts it). A worker ends after
 * MH_WORKER_REQUESTS requests, which bounds whatever one request could leave
 * in its memory for later ones. A worker idle for MH_WORKER_IDLE_MS ends, and
 * while more than MH_WORKERS_IDLE are idle, one idle for MH_WORKER_SURPLUS_MS
 * does: a burst leaves no crowd of workers behind, and a steady load of
 * several clients, whose requests in flight rise and fall all the time, does
 * not fork and end workers over and over.
 *
 * How it works: the main loop reads a request; if it only reads (PING,
 * CAPACITY, STATS, LIST) it answers at once (STATS and LIST of mounts go to a
 * worker when the core answers them, holding no key: mh_relay.c); otherwise mh_worker_start()
 * checks the request's ids and paths (mh_ops_keys) against those of the requests in flight: any
 * overlap, or MH_WORKERS_MAX in flight, is answered MH_E_BUSY at once (the helper trusts nothing
 * rpcd says, including its own locks). Else the request goes to an idle worker, or to one forked
 * for it, with one end of a SOCK_SEQPACKET pair and nothing else of the helper's: not the request
 * channel, not the supervisor's. The worker handles it (audit record
 * included), sends its answer on the pair and waits for the next one, which
 * the main loop may send as soon as it has the answer. (A test holding the
 * worker after its answer makes it say so first, MH_NOTE_HELD, and again when
 * it is let go, MH_NOTE_READY: a held worker gets no request.)
 *
 * Exactly one answer per request, and only on the channel it was asked on.
 * Only the main loop writes to rpcd. It forwards an answer as it arrives and
 * releases the request's ids at that moment, before it reads another request.
 * A worker that dies with a request in flight (killed, crashed) is answered
 * for with MH_E_FAILED; one that answered and was then killed is answered for
 * with what it said. Each request keeps the generation of the channel it came
 * on (mh_main.c counts them: a new rpcd, a dropped channel); its answer goes
 * out only if that channel is still the current one, since a new rpcd never
 * asked for it.
 *
 * A worker also notes on the pair when it freezes and thaws a source file
 * system: one that keeps it frozen longer than the policy's
 * freeze_max_seconds is killed and the file system thawed by the main loop
 * (mh_workers_enforce), so no freeze outlives its bound whatever the copy
 * does. If a worker dies during a request, the main loop thaws what it may
 * have frozen (mh_copy_thaw), and it removes the temporary file or the unused
 * loop device the worker may have left (mh_sweep).
 *
 * Runs in the helper's main process (start, reap) and in the worker (the
 * operations). Fatal: nothing; a fork that fails is an error answer.
 */
#include "mh_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mh_copy.h"
#include "mh_dir.h"
#include "mh_helper_ops.h"
#include "mh_image_life.h"
#include "mh_pause.h"
#include "mh_proto_all.h"
#include "mh_space.h"
#include "policy_all.h"

/* A worker ends after this many requests, so nothing one request left behind lasts long. */
#define MH_WORKER_REQUESTS 1000
/* Idle workers kept for the next requests (MH_WORKER_IDLE_MS); more end sooner. */
#define MH_WORKERS_IDLE 4
/* An idle worker ends after this long without a request. */
#define MH_WORKER_IDLE_MS 5000
/* While more than MH_WORKERS_IDLE are idle, one idle this long ends. */
#define MH_WORKER_SURPLUS_MS 1000

struct slot {
	pid_t pid;         /* 0: free (no worker) */
	int pidfd;         /* the worker's pidfd: the only way the helper signals it */
	int fd;            /* the main loop's end of the worker's pair (O_NONBLOCK) */
	bool busy;         /* a request is in flight: gen, hold, req and ans are its */
	bool held;         /* a test holds it after its answer (MH_NOTE_HELD until MH_NOTE_READY) */
	int64_t idle_ms;   /* when its last request ended */
	bool ending;       /* its pair is shut down: it ends after what it is doing */
	unsigned served;   /* requests it has answered */
	uint32_t gen;      /* the channel generation its request came on */
	int64_t frozen_ms; /* when it froze a source file system (NOTE_FROZEN), 0 if not frozen */
	bool overdue;      /* killed for holding a freeze too long */
	bool internal;     /* its request is the main loop's own (PURGE): answered to nobody */
	struct mh_space_hold hold; /* its request's claim on the data directory (mh_space.c) */
	size_t ans_len;            /* its encoded answer, once it has sent one; else 0 */
	uint32_t core_id;          /* its question to the core in flight, by the core's id; 0 */
	uint32_t core_ask;         /* that question's id as the worker asked it */
	int chan;                  /* which channel it went to: MH_CHAN_CORE or MH_CHAN_READER */
	bool retire;               /* ends once it has answered (a stop, with a core) */
	struct slot_io *io;        /* its request and answer, in the main loop's own memory */
};

/*
 * The bytes of the requests in flight and of their answers, and the main
 * loop's other large buffers, live in memory marked MADV_DONTFORK: a worker
 * holds only the requests it serves itself, never a copy of others', and
 * neither a fork nor a worker's memory grows with them (pages the main loop
 * writes after a fork would otherwise stay behind in every worker, as its own
 * copies).
 */
struct slot_io {
	struct mh_msg req; /* what the worker is doing (its keys point in here) */
	uint8_t ans[MH_MSG_MAX];
	uint8_t question[MH_MSG_MAX]; /* its question to the core, until the core's channel takes
	                                 it */
	size_t question_len;          /* 0 once sent (or when there is none) */
};

struct main_io {
	struct slot_io slot[MH_WORKERS_MAX];
	struct mh_msg ans;           /* an answer the main loop gives itself (BUSY, FAILED) */
	struct mh_msg purge;         /* a request the main loop gives a worker itself */
	uint8_t out[MH_MSG_MAX];     /* a request on its way to a worker; an encoded answer */
	uint8_t scratch[MH_MSG_MAX]; /* answers nobody asked for, read and dropped */
};

static struct slot slots[MH_WORKERS_MAX];
static struct main_io *mio;
static int note_fd = -1; /* in a worker: its end of the pair */
/* In the main loop: the capable core's channel and its reader's, -1 without a core. */
static int chan_fd[MH_CHANS] = {-1, -1};
static uint32_t core_next = 1;

void *mh_main_only(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || madvise(p, size, MADV_DONTFORK) < 0)
		log_fatal("cannot set up the main loop's buffers: %s", strerror(errno));
	return p;
}

void mh_workers_init(void)
{
	mio = mh_main_only(sizeof(*mio));
	for (size_t i = 0; i < MH_WORKERS_MAX; i++)
		slots[i] = (struct slot){.pidfd = -1, .fd = -1, .io = &mio->slot[i]};
}

void mh_worker_note(char what)
{
	if (note_fd >= 0)
		(void)!send(note_fd, &what, 1, MSG_NOSIGNAL);
}

size_t mh_workers_count(void)
{
	size_t n = 0;
	for (size_t i = 0; i < MH_WORKERS_MAX; i++)
		n += slots[i].pid != 0;
	return n;
}

static void send_encoded(int peer, const uint8_t *out, size_t len)
{
	if (peer >= 0)
		(void)send(peer, out, len, MSG_NOSIGNAL); /* rpcd gone: the answer goes with it */
}

static void send_answer(int peer, const struct mh_msg *ans)
{
	size_t len;
	if (mh_msg_encode(ans, mio->out, sizeof(mio->out), &len) < 0)
		log_fatal("cannot encode answer to request %u", ans->id); /* our own bug */
	send_encoded(peer, mio->out, len);
}

/* Does req share an id or a path with a request in flight (answered or not: rpcd has not seen it)?
 */
static const struct slot *conflict(const struct mh_msg *req)
{
	const char *mine[MH_OPS_KEYS_MAX], *theirs[MH_OPS_KEYS_MAX];
	size_t nm = mh_ops_keys(req, mine);
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		if (!slots[i].busy)
			continue;
		size_t nt = mh_ops_keys(&slots[i].io->req, theirs);
		for (size_t a = 0; a < nm; a++)
			for (size_t b = 0; b < nt; b++)
				if (mine[a][0] && strcmp(mine[a], theirs[b]) == 0)
					return &slots[i];
	}
	return NULL;
}

bool mh_workers_hold(const char *key)
{
	const char *theirs[MH_OPS_KEYS_MAX];
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		if (!slots[i].busy)
			continue;
		size_t nt = mh_ops_keys(&slots[i].io->req, theirs);
		for (size_t b = 0; b < nt; b++)
			if (strcmp(key, theirs[b]) == 0)
				return true;
	}
	return false;
}

/* The helper never holds a descriptor this high (a worker's scan stops below it). */
#define MH_FDS_SCANNED 1024

/*
 * In a new worker: fill every gap below its highest descriptor (with a copy
 * of fd 0), so that whatever a request opens lies above it. Returns that
 * highest descriptor. One poll() tells which descriptors are open (POLLNVAL:
 * not); a descriptor limit below the scan makes it fail, then each is asked.
 */
static int worker_fill_fds(void)
{
	struct pollfd p[MH_FDS_SCANNED - 3];
	bool polled;
	int top = 2;
	for (int fd = 3; fd < MH_FDS_SCANNED; fd++)
		p[fd - 3] = (struct pollfd){.fd = fd};
	polled = poll(p, MH_FDS_SCANNED - 3, 0) >= 0;
	for (int fd = 3; fd < MH_FDS_SCANNED; fd++) {
		if (!polled)
			p[fd - 3].revents = fcntl(fd, F_GETFD) < 0 ? POLLNVAL : 0;
		if (!(p[fd - 3].revents & POLLNVAL))
			top = fd;
	}
	for (int fd = 3; fd < top; fd++)
		if ((p[fd - 3].revents & POLLNVAL) && fcntl(0, F_DUPFD_CLOEXEC, fd) != fd)
			_exit(2);
	return top;
}

static void __attribute__((noreturn))
worker_main(const struct mh_ctx *c, int peer, int ctl, int sock, pid_t parent)
{
	static struct mh_msg req, ans;
	static uint8_t buf[MH_MSG_MAX];
	/* Die with the helper; if it is already gone, do nothing at all. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(2);
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		if (slots[i].pid != 0) {
			close(slots[i].fd); /* the other workers' pairs and pidfds are not ours */
			mh_closep(&slots[i].pidfd);
		}
	}
	/* Only the main loop speaks to rpcd and to the supervisor. */
	if (peer >= 0)
		close(peer);
	if (ctl >= 0)
		close(ctl);
	for (int i = 0; i < MH_CHANS; i++) {
		if (chan_fd[i] >= 0)
			close(chan_fd[i]); /* its questions go through the main loop */
		chan_fd[i] = -1;
	}
	note_fd = sock;
	int top = worker_fill_fds();
	for (;;) {
		size_t len;
		ssize_t n = recv(sock, buf, sizeof(buf), 0);
		if (n == 0)
			_exit(0); /* the main loop ended this worker */
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || mh_msg_decode(buf, (size_t)n, &req) < 0 ||
		    mh_ops_handle(c, &req, &ans) < 0 ||
		    mh_msg_encode(&ans, buf, sizeof(buf), &len) < 0)
			_exit(3);
		/* Nothing of this request stays open, or holds a directory as its cwd. */
		if (close_range((unsigned)top + 1, ~0U, 0) < 0 || chdir("/") < 0)
			_exit(3);
		const char *keys[MH_OPS_KEYS_MAX];
		const char *key = mh_ops_keys(&req, keys) ? keys[0] : NULL;
		mh_pause(c, "answering", key); /* tests: the work done, the answer not out */
		/* Ready for the next request with its answer, unless a test holds it after it. */
		bool held = mh_pause_held(c, "answered", key);
		if (held)
			mh_worker_note(MH_NOTE_HELD);
		if (send(sock, buf, len, MSG_NOSIGNAL) != (ssize_t)len)
			_exit(3);
		if (held) {
			mh_pause(c, "answered", key); /* tests: killed now */
			mh_worker_note(MH_NOTE_READY);
		}
	}
}

/* A new worker in the free slot s. -1 with errno when it cannot be made. */
static int spawn(const struct mh_ctx *c, struct slot *s, int peer, int ctl)
{
	int sp[2];
	pid_t parent = getpid(), pid;
	fflush(NULL);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(sp[0]);
		worker_main(c, peer, ctl, sp[1], parent);
	}
	int err = errno;
	close(sp[1]);
	if (pid < 0) {
		close(sp[0]);
		errno = err;
		return -1;
	}
	(void)fcntl(sp[0], F_SETFL, O_NONBLOCK);
	*s = (struct slot){.pid = pid, .fd = sp[0], .io = s->io};
	/* Race-free: the worker cannot be reaped (and its pid reused) before we wait for it. */
	s->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	return 0;
}

/* An idle worker waiting for a request, else a slot without a worker; NULL if neither. */
static struct slot *pick(void)
{
	struct slot *empty = NULL;
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		struct slot *s = &slots[i];
		if (s->pid != 0 && !s->held && !s->busy && !s->ending)
			return s;
		if (s->pid == 0 && !s->busy && !empty)
			empty = s;
	}
	return empty;
}

/* A worker that has exited (its end of the pair closed): wait for it; its slot is free. */
static pid_t bury(struct slot *s, int *st)
{
	pid_t got;
	while ((got = waitpid(s->pid, st, 0)) < 0 && errno == EINTR)
		;
	close(s->fd);
	mh_closep(&s->pidfd);
	return got;
}

/* Reads of snapshot images (BLOCKS) in flight. */
static size_t reading(void)
{
	size_t n = 0;
	for (size_t i = 0; i < MH_WORKERS_MAX; i++)
		n += slots[i].busy && slots[i].io->req.type == MH_REQ_BLOCKS;
	return n;
}

/* A request that cannot start: answered at once, unless it is the main loop's own (later). */
static void refuse(const struct mh_ctx *c, const struct mh_msg *req, int peer, bool internal,
                   enum mh_err_kind kind, int err, const char *why)
{
	if (internal)
		return;
	mh_ops_refuse(c, req, &mio->ans, kind, err, why);
	send_answer(peer, &mio->ans);
}

/* Hand req to an idle worker, or to a new one; its answer goes to peer, or to nobody. */
static void start(const struct mh_ctx *c, const struct mh_msg *req, int peer, uint32_t gen, int ctl,
                  bool internal)
{
	size_t len;
	const struct slot *busy = conflict(req);
	struct slot *s = busy ? NULL : pick();
	char why[128];

	if (busy) {
		snprintf(why, sizeof(why), "another operation on this volume is in flight (%s)",
		         mh_type_name(busy->io->req.type));
		refuse(c, req, peer, internal, MH_E_BUSY, EINPROGRESS, why);
		return;
	}
	if (!s || (req->type == MH_REQ_BLOCKS && reading() >= MH_WORKERS_BLOCKS)) {
		refuse(c, req, peer, internal, MH_E_BUSY, EAGAIN,
		       s ? "too many reads of snapshots in flight"
		         : "too many operations in flight");
		return;
	}
	/* It was just decoded (or made here): failing to encode it is our own bug. */
	if (mh_msg_encode(req, mio->out, sizeof(mio->out), &len) < 0)
		log_fatal("cannot encode request %u", req->id);
	struct mh_space_hold hold;
	if (mh_space_reserve(c, req, &hold, why, sizeof(why)) < 0) {
		refuse(c, req, peer, internal, MH_E_NOSPACE, ENOSPC, why);
		return;
	}
	for (;;) {
		bool fresh = s->pid == 0;
		if (fresh && spawn(c, s, peer, ctl) < 0) {
			int err = errno;
			mh_space_settle(&hold);
			snprintf(why, sizeof(why), "cannot start a worker: %s", strerror(err));
			refuse(c, req, peer, internal, MH_E_FAILED, err, why);
			return;
		}
		s->busy = true;
		s->internal = internal;
		s->gen = gen;
		s->frozen_ms = 0;
		s->overdue = false;
		s->hold = hold;
		s->io->req = *req;
		s->ans_len = 0;
		if (!fresh) { /* a test may kill the idle worker here */
			const char *keys[MH_OPS_KEYS_MAX];
			mh_pause(c, "dispatch", mh_ops_keys(req, keys) ? keys[0] : NULL);
		}
		/*
		 * A worker that dies once this send is done is answered for by its end of
		 * file (MH_E_FAILED: it may have acted). One that had already died while
		 * idle (EPIPE: its end closed, the request not delivered) never saw the
		 * request: it is buried now and the request goes to another worker.
		 */
		if (send(s->fd, mio->out, len, MSG_NOSIGNAL) >= 0 || fresh ||
		    (errno != EPIPE && errno != ECONNRESET))
			return;
		int st = 0;
		s->busy = false;
		(void)bury(s, &st);
		log_kv(LOG_LVL_WARN, "worker_ended", "reason", "died while idle", NULL);
		*s = (struct slot){.pidfd = -1, .fd = -1, .io = s->io};
		s = pick(); /* at worst this slot again, empty: a new worker */
	}
}

void mh_worker_start(const struct mh_ctx *c, const struct mh_msg *req, int peer, uint32_t gen,
                     int ctl)
{
	start(c, req, peer, gen, ctl, false);
}

/* ---- what dead operations left ----------------------------------------------- */

/*
 * Removing what a dead operation left costs what a tenant chose: a tree's
 * files (a million empty ones fit in a small volume), a copy's extents (the
 * tenant's scattered writes). So the main loop never does it, and never waits
 * for it: it only reads the names the helper gave those leftovers (the
 * temporary files in the data directory, the ids in the bases' work and trash
 * areas), after start and after a worker's death, and gives one PURGE at a
 * time to a worker, which holds that id as its key while it runs (a request
 * on it meanwhile is BUSY; rpcd retries). An id a request in flight holds
 * waits until that request is over: it may remove nothing of it (a DELETE, a
 * snapshot's copy), and no later look may come.
 */
struct leftover {
	size_t base; /* a base's index, or SIZE_MAX for the data directory's temporary files */
	char id[MH_ID_MAX + 1];
};
static struct leftover *leftovers;
static size_t nleftovers, leftovers_cap;

static void leftover_found(size_t base, const char *id)
{
	for (size_t i = 0; i < nleftovers; i++)
		if (leftovers[i].base == base && strcmp(leftovers[i].id, id) == 0)
			return; /* in both areas: one purge empties both */
	if (nleftovers == leftovers_cap) {
		size_t cap = leftovers_cap ? 2 * leftovers_cap : 16;
		struct leftover *v = realloc(leftovers, cap * sizeof(*v));
		if (!v)
			abort();
		leftovers = v;
		leftovers_cap = cap;
	}
	leftovers[nleftovers].base = base;
	snprintf(leftovers[nleftovers].id, sizeof(leftovers[0].id), "%s", id);
	nleftovers++;
}

void mh_workers_find_leftovers(const struct mh_ctx *c)
{
	nleftovers = 0;
	mh_image_leftovers(c, leftover_found);
	mh_dir_leftovers(c, leftover_found);
}

static bool purging(void)
{
	for (size_t i = 0; i < MH_WORKERS_MAX; i++)
		if (slots[i].busy && slots[i].internal)
			return true;
	return false;
}

void mh_workers_purge(const struct mh_ctx *c)
{
	struct mh_req_dir *q = &mio->purge.u.dir;
	/* One at a time: the workers are rpcd's first. */
	for (size_t i = nleftovers; i-- > 0 && !purging();) {
		const struct leftover *l = &leftovers[i];
		if (mh_workers_hold(l->id))
			continue; /* once its request is over */
		memset(&mio->purge, 0, sizeof(mio->purge));
		mio->purge.type = MH_REQ_PURGE;
		if (l->base != SIZE_MAX)
			snprintf(q->base, sizeof(q->base), "%s", pol_base_dir(c->pol, l->base));
		snprintf(pol_volume_id_valid(l->id) ? q->volume_id : q->snapshot_id, MH_ID_MAX + 1,
		         "%s", l->id);
		start(c, &mio->purge, -1, 0, -1, true);
		if (!purging())
			return; /* no worker is free now: when one is */
		leftovers[i] = leftovers[--nleftovers];
	}
}

/* The volume a copy freezes, if the request is one. */
static const char *copy_source(const struct mh_msg *req)
{
	if (req->type == MH_REQ_SNAPSHOT)
		return req->u.snapshot.volume_id;
	if (req->type == MH_REQ_CLONE && req->u.clone.source_kind == MH_SRC_VOLUME)
		return req->u.clone.source_id;
	if (req->type == MH_REQ_GROUP_SNAPSHOT)
		return req->u.group.volume_id[0];
	return NULL;
}

/* Thaw what a copy's worker may have left frozen: its source, or each of a group's. */
static void thaw_sources(const struct mh_ctx *c, const struct mh_msg *req)
{
	bool group = req->type == MH_REQ_GROUP_SNAPSHOT;
	for (size_t i = 0; group && i < req->u.group.n && i < MH_GROUP_MAX; i++)
		mh_copy_thaw(c, req->u.group.volume_id[i]);
	if (!group && copy_source(req))
		mh_copy_thaw(c, copy_source(req));
}

/*
 * Tell the worker of s to end once it waits for a request again (end of file
 * on its pair); why, if not NULL, is logged with how long it has been idle.
 */
static void end_worker(struct slot *s, const char *why)
{
	if (!s->ending) {
		(void)shutdown(s->fd, SHUT_WR);
		if (why) {
			char idle_ms[24];
			snprintf(idle_ms, sizeof(idle_ms), "%lld",
			         (long long)(mono_ms() - s->idle_ms));
			log_kv(LOG_LVL_INFO, "worker_retired", "reason", why, "idle_ms", idle_ms,
			       NULL);
		}
	}
	s->ending = true;
}

static bool idle(const struct slot *s)
{
	return s->pid != 0 && !s->busy && !s->ending;
}

static size_t idle_workers(void)
{
	size_t n = 0;
	for (size_t i = 0; i < MH_WORKERS_MAX; i++)
		n += idle(&slots[i]);
	return n;
}

/* How long an idle worker is kept now. */
static int64_t keep_idle_ms(void)
{
	return idle_workers() > MH_WORKERS_IDLE ? MH_WORKER_SURPLUS_MS : MH_WORKER_IDLE_MS;
}

int mh_workers_timeout_ms(const struct mh_ctx *c)
{
	int64_t limit = (int64_t)pol_freeze_max_seconds(c->pol) * 1000, next = -1, now = mono_ms();
	int64_t keep = keep_idle_ms();
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		const struct slot *s = &slots[i];
		int64_t left;
		if (idle(s))
			left = s->idle_ms + keep - now;
		else if (s->busy && s->frozen_ms != 0 && !s->overdue)
			left = s->frozen_ms + limit - now;
		else
			continue;
		if (next < 0 || left < next)
			next = left < 0 ? 0 : left;
	}
	return next > INT32_MAX ? INT32_MAX : (int)next;
}

void mh_workers_enforce(const struct mh_ctx *c)
{
	int64_t limit = (int64_t)pol_freeze_max_seconds(c->pol) * 1000, now = mono_ms();
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		struct slot *s = &slots[i];
		int64_t keep = keep_idle_ms();
		/* The pool shrinks when the node is quiet. */
		if (idle(s) && now - s->idle_ms >= keep)
			end_worker(s, keep == MH_WORKER_SURPLUS_MS ? "surplus" : "idle");
		if (!s->busy || s->frozen_ms == 0 || s->overdue || now - s->frozen_ms < limit)
			continue;
		/*
		 * A freeze never outlives its bound: the copy is abandoned (its
		 * worker killed, its temporary file removed by the next attempt) and
		 * the source thawed at once, whatever the worker was doing.
		 */
		s->overdue = true;
		if (s->pidfd >= 0)
			syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
		const char *src = copy_source(&s->io->req);
		thaw_sources(c, &s->io->req);
		log_kv(LOG_LVL_ERROR, "freeze_overdue", "op", mh_type_name(s->io->req.type),
		       "volume_id", src ? src : "", NULL);
	}
}

size_t mh_workers_pollfds(struct pollfd *p, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < MH_WORKERS_MAX && n < max; i++)
		if (slots[i].pid != 0)
			p[n++] = (struct pollfd){.fd = slots[i].fd, .events = POLLIN};
	return n;
}

/* ---- the capable core's questions ------------------------------------------------ */

static const char *const chan_name[MH_CHANS] = {"capable core", "core's reader"};

/*
 * Looks (STATS, LIST, STAGE_CHECK) asked of the reader at once, at most: a
 * reader that stalls (or was taken over and stays silent) holds that many
 * workers, half of them, so every other request still finds one; a ninth look
 * is BUSY, which the CO asks again (kubelet: at its next volume stats period,
 * or its next NodeStageVolume).
 */
#define MH_READER_ASKING_MAX 8

/* Questions on channel chan not answered yet. */
static size_t asking(int chan)
{
	size_t n = 0;
	for (size_t i = 0; i < MH_WORKERS_MAX; i++)
		n += slots[i].busy && slots[i].core_id != 0 && slots[i].chan == chan;
	return n;
}

/* The worker of s asked a look with the reader full: BUSY, from the main loop, at once. */
static void busy_look(struct slot *s, uint32_t ask)
{
	struct mh_msg ans = {.type = MH_ANS_ERROR, .id = ask};
	size_t len;
	ans.u.error.kind = MH_E_BUSY;
	ans.u.error.sys_errno = EAGAIN;
	snprintf(ans.u.error.reason, sizeof(ans.u.error.reason),
	         "the core's reader has %d looks in flight already", MH_READER_ASKING_MAX);
	if (mh_msg_encode(&ans, mio->scratch, MH_MSG_MAX, &len) < 0)
		log_fatal("cannot encode a BUSY answer");   /* our own bug */
	(void)send(s->fd, mio->scratch, len, MSG_NOSIGNAL); /* a dead worker is reaped */
}

static uint32_t id_at(const uint8_t *msg)
{
	return (uint32_t)msg[4] << 24 | (uint32_t)msg[5] << 16 | (uint32_t)msg[6] << 8 | msg[7];
}

static void set_id(uint8_t *msg, uint32_t id)
{
	for (int i = 0; i < 4; i++)
		msg[4 + i] = (uint8_t)(id >> (24 - 8 * i));
}

void mh_workers_set_core(int core, int reader)
{
	chan_fd[MH_CHAN_CORE] = core;
	chan_fd[MH_CHAN_READER] = reader;
}

/*
 * A worker's question to the core, or to its reader (STATS, LIST), under an id
 * of the main loop's own: the core answers out of order, and the workers' ids
 * are not unique.
 */
static void relay_to_core(struct slot *s, uint8_t *msg, size_t len)
{
	uint16_t type = (uint16_t)(msg[2] << 8 | msg[3]);
	bool looks = type == MH_REQ_STATS || type == MH_REQ_LIST || type == MH_REQ_STAGE_CHECK;
	bool relayed = looks || type == MH_REQ_STAGE || type == MH_REQ_UNSTAGE ||
	               type == MH_REQ_PUBLISH || type == MH_REQ_UNPUBLISH ||
	               type == MH_REQ_EXPAND || type == MH_REQ_FREEZE || type == MH_REQ_THAW ||
	               type == MH_REQ_REFRESH || type == MH_REQ_ATTACHED || type == MH_REQ_FLUSH;
	s->chan = looks ? MH_CHAN_READER : MH_CHAN_CORE;
	if (chan_fd[s->chan] < 0 || len < MH_HDR_LEN || s->core_id != 0 || !s->busy || !relayed)
		log_fatal("a worker asked the core out of turn"); /* our own bug */
	if (looks && asking(MH_CHAN_READER) >= MH_READER_ASKING_MAX) {
		busy_look(s, id_at(msg));
		return;
	}
	s->core_ask = id_at(msg);
	s->core_id = core_next++;
	if (core_next == 0)
		core_next = 1;
	set_id(msg, s->core_id);
	memcpy(s->io->question, msg, len);
	s->io->question_len = len;
	mh_workers_core_send(s->chan);
}

int mh_workers_core_fd(int chan)
{
	return chan_fd[chan];
}

/* The slot whose question waits longest for channel chan; NULL if none waits. */
static struct slot *next_question(int chan)
{
	struct slot *first = NULL;
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		struct slot *s = &slots[i];
		if (s->io && s->io->question_len && s->chan == chan &&
		    (!first || s->core_id - first->core_id > (1U << 31)))
			first = s;
	}
	return first;
}

bool mh_workers_core_waiting(int chan)
{
	return next_question(chan) != NULL;
}

/*
 * Never a blocking send: a core busy with a long mount must not stop this
 * loop, which answers PING, reaps workers and ends freezes that ran out.
 */
void mh_workers_core_send(int chan)
{
	struct slot *s;
	while ((s = next_question(chan)) != NULL) {
		ssize_t n = send(chan_fd[chan], s->io->question, s->io->question_len,
		                 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return; /* the rest when the channel can take it (POLLOUT) */
		if (n != (ssize_t)s->io->question_len)
			log_fatal("the %s's channel broke: %s", chan_name[chan], strerror(errno));
		s->io->question_len = 0;
	}
}

void mh_workers_core_answer(int chan)
{
	uint8_t *buf = mio->scratch;
	ssize_t n = recv(chan_fd[chan], buf, MH_MSG_MAX, MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		log_fatal("the %s ended its channel", chan_name[chan]);
	if ((size_t)n < MH_HDR_LEN || (size_t)n > MH_MSG_MAX)
		log_fatal("the %s sent a datagram of %zd bytes", chan_name[chan], n);
	uint32_t id = id_at(buf);
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		struct slot *s = &slots[i];
		/* Only the channel asked answers: the reader never answers for the core. */
		if (!s->busy || s->core_id == 0 || s->core_id != id || s->chan != chan)
			continue;
		if (s->pid == 0) { /* its worker died: the keys it held are free only now */
			log_kv(LOG_LVL_INFO, "core_answer_dropped", "reason",
			       "the worker that asked has ended", NULL);
			*s = (struct slot){.pidfd = -1, .fd = -1, .io = s->io};
			return;
		}
		set_id(buf, s->core_ask);
		s->core_id = 0;
		(void)send(s->fd, buf, (size_t)n, MSG_NOSIGNAL); /* a dead worker is reaped */
		return;
	}
	log_kv(LOG_LVL_INFO, "core_answer_dropped", "reason", "the worker that asked has ended",
	       NULL);
}

int mh_core_ask(const struct mh_msg *req, struct mh_msg *ans, struct mh_res *r)
{
	static uint8_t buf[1 + MH_MSG_MAX];
	size_t len;
	ssize_t n;
	buf[0] = MH_NOTE_CORE;
	if (note_fd < 0 || mh_msg_encode(req, buf + 1, MH_MSG_MAX, &len) < 0)
		return mh_fail(r, MH_E_FAILED, 0, "cannot ask the capable core");
	if (send(note_fd, buf, len + 1, MSG_NOSIGNAL) != (ssize_t)len + 1)
		return mh_fail(r, MH_E_FAILED, errno, "cannot ask the capable core: %s",
		               strerror(errno));
	do
		n = recv(note_fd, buf, MH_MSG_MAX, 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0 || mh_msg_decode(buf, (size_t)n, ans) < 0)
		_exit(3);               /* the main loop ended this worker, or broke the pair */
	if (ans->type == req->type + 1) /* each request's answer type is the next one */
		return 0;
	if (ans->type != MH_ANS_ERROR)
		return mh_fail(r, MH_E_FAILED, 0, "the capable core answered %s to %s",
		               mh_type_name(ans->type), mh_type_name(req->type));
	enum mh_err_kind kind = (enum mh_err_kind)ans->u.error.kind;
	if (kind == MH_E_OK || kind > MH_E_PRECONDITION)
		kind = MH_E_FAILED; /* not a kind the core may answer */
	return mh_fail(r, kind, (int)ans->u.error.sys_errno, "%s", ans->u.error.reason);
}

/* What the worker sent so far: notes, and its answer. Returns recv's last result. */
static ssize_t read_worker(struct slot *s)
{
	for (;;) {
		ssize_t n;
		bool want = s->busy && !s->ans_len; /* one answer per request, the first */
		uint8_t *buf = want ? s->io->ans : mio->scratch;
		n = recv(s->fd, buf, MH_MSG_MAX, MSG_DONTWAIT);
		if (n == 1 && buf[0] == MH_NOTE_HELD)
			s->held = true;
		else if (n == 1 && buf[0] == MH_NOTE_READY)
			s->held = false;
		else if (n == 1)
			s->frozen_ms = buf[0] == MH_NOTE_FROZEN ? mono_ms() : 0;
		else if (n > 1 && buf[0] == MH_NOTE_CORE)
			relay_to_core(s, buf + 1, (size_t)n - 1);
		else if (n > 1 && want)
			s->ans_len = (size_t)n;
		else if (n <= 0 && !(n < 0 && errno == EINTR))
			return n;
	}
}

/* The worker ended without an answer: say why, undo what it may have left. */
static void answer_for_dead(const struct mh_ctx *c, struct slot *s, pid_t got, int st)
{
	struct mh_msg *ans = &mio->ans;
	char why[160];
	if (s->overdue)
		snprintf(why, sizeof(why),
		         "the copy kept the source file system frozen longer than "
		         "freeze_max_seconds (%u s): abandoned, source thawed",
		         pol_freeze_max_seconds(c->pol));
	else if (got > 0 && WIFSIGNALED(st))
		snprintf(why, sizeof(why), "worker killed by signal %d", WTERMSIG(st));
	else
		snprintf(why, sizeof(why), "worker failed (status %d)",
		         got > 0 ? WEXITSTATUS(st) : -1);
	log_kv(LOG_LVL_ERROR, "worker_died", "op", mh_type_name(s->io->req.type), "reason", why,
	       NULL);
	/* A copy may have died with the source volume frozen: thaw it. */
	thaw_sources(c, &s->io->req);
	if (!c->core) /* the core undoes its own failed STAGE; nothing here attaches */
		mh_sweep(c, mh_workers_hold); /* the loop device it attached but did not bind */
	mh_workers_find_leftovers(c);         /* its temporary file or tree: purged in a worker */
	mh_ops_refuse(c, &s->io->req, ans, MH_E_FAILED, 0, why);
	if (mh_msg_encode(ans, s->io->ans, sizeof(s->io->ans), &s->ans_len) < 0)
		log_fatal("cannot encode answer to request %u", ans->id); /* our own bug */
}

/* The request of s is over: its ids are free from here on; count what it really changed. */
static void release(struct slot *s)
{
	s->busy = false;
	s->frozen_ms = 0;
	s->core_id = 0; /* a late answer of the core goes to nobody */
	mh_space_settle(&s->hold);
}

/*
 * Its answer to rpcd, if the channel it was asked on is still the current one;
 * the main loop's own requests are answered to nobody (their audit records say).
 */
static void forward(struct slot *s, int peer, uint32_t gen)
{
	if (s->internal)
		; /* nothing to send */
	else if (s->gen == gen)
		send_encoded(peer, s->io->ans, s->ans_len);
	else
		log_kv(LOG_LVL_INFO, "answer_dropped", "op", mh_type_name(s->io->req.type),
		       "reason", "asked on a channel that has been replaced", NULL);
	s->ans_len = 0;
}

/* Did poll() see an event on fd (or is fd not among those it watched)? */
static bool has_event(int fd, const struct pollfd *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i].fd == fd)
			return p[i].revents != 0;
	return true;
}

void mh_workers_reap(const struct mh_ctx *c, int peer, uint32_t gen, const struct pollfd *p,
                     size_t n)
{
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		struct slot *s = &slots[i];
		int st = 0;
		if (s->pid == 0 || !has_event(s->fd, p, n))
			continue;
		ssize_t last = read_worker(s);
		if (s->busy && s->ans_len) {
			s->idle_ms = mono_ms();
			release(s);
			forward(s, peer, gen);
			if (++s->served >= MH_WORKER_REQUESTS)
				end_worker(s, "served");
			else if (s->retire)
				end_worker(s, NULL);
		}
		if (last != 0)
			continue; /* running, or waiting for a request (EAGAIN) */
		/* End of file: the worker has exited; once reaped it holds nothing at all. */
		pid_t got = bury(s, &st);
		/* A question the core has (not one still waiting here) may still act. */
		uint32_t asked = s->io->question_len ? 0 : s->core_id;
		s->io->question_len = 0;
		if (s->busy) {
			/*
			 * Released before the sweep, which spares what requests in flight
			 * hold; one whose question the core still works on keeps holding
			 * its keys until the core answers (mh_workers_core_answer).
			 */
			release(s);
			s->busy = asked != 0;
			answer_for_dead(c, s, got, st);
			forward(s, peer, gen);
		} else if (!s->ending) {
			log_kv(LOG_LVL_WARN, "worker_ended", "reason", "died while idle", NULL);
		}
		*s = (struct slot){.pidfd = -1,
		                   .fd = -1,
		                   .io = s->io,
		                   .busy = asked != 0,
		                   .core_id = asked,
		                   .chan = s->chan};
	}
}

void mh_workers_end_all(void)
{
	for (size_t i = 0; i < MH_WORKERS_MAX; i++) {
		if (slots[i].pid == 0)
			continue;
		/* One that may still wait for the core's answer ends after its own. */
		if (slots[i].busy && !slots[i].internal && chan_fd[MH_CHAN_CORE] >= 0) {
			slots[i].retire = true;
			continue;
		}
		end_worker(&slots[i], NULL); /* stopping: the helper says so */
		/* A purge may take long, and the next start purges again: it need not finish. */
		if (slots[i].busy && slots[i].internal && slots[i].pidfd >= 0)
			syscall(SYS_pidfd_send_signal, slots[i].pidfd, SIGKILL, NULL, 0);
	}
}
