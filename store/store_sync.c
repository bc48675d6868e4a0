/*
 * Group commit: the store's lock, and how a commit becomes durable.
 *
 * sqlite runs with synchronous=NORMAL in WAL mode: a commit appends its
 * frames to the WAL and does not sync it (sqlite still syncs the WAL before
 * each checkpoint and the main file after it, so a power loss never damages
 * the database; it could only lose the last commits). The store closes that
 * gap itself: every public entry point takes st->mu through store_lock(),
 * and the outermost store_unlock() does not return until every commit made
 * so far is on disk, by an fdatasync of the WAL. One fdatasync covers every
 * commit appended before it starts, so threads that commit while another
 * syncs share the next one: with eight callers, a few fdatasyncs serve eight
 * commits, where synchronous=FULL made one each, in turn, under the lock.
 *
 * What a caller may rely on: when an entry point that wrote returns, what it
 * wrote survives power loss. An entry point that only read does not wait:
 * the rows it returns may come from another thread's commit whose sync is
 * still running. The thread notes how far it read, and store_wait_read()
 * waits for that; rpcd calls it before it answers a call, so no answer
 * carries a row that a power loss could still take away. (Waiting in every
 * read made each call wait for the syncs of unrelated calls' commits, many
 * times over: a quarter of rpcd's context switches.)
 *
 * sqlite counts commits for us: its WAL hook runs after each one, on the
 * committing thread, under st->mu. The hook replaces sqlite's automatic
 * checkpoint, so it checkpoints as that would (PASSIVE, from 1000 pages on).
 *
 * The WAL is the file sqlite keeps beside the database as long as a
 * connection has it open; it is removed only when the last connection
 * closes, and reset in place after a checkpoint. The store opens it once and
 * checks before each sync that the name still leads to the same file. An
 * fdatasync that fails is fatal (abort): the kernel may have given up the
 * pages it could not write, so no later sync could vouch for them, and no
 * answer may go out that claims a write the disk may not hold.
 *
 * Runs in rpcd, unprivileged. Fatal (abort): a pthread call failing, a
 * failed fdatasync, the WAL gone or replaced under an open connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "store_int.h"

/* WAL pages after which a commit checkpoints (sqlite's own default). */
#define STORE_CHECKPOINT_PAGES 1000

static int store_wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct store *st = arg;

	st->committed++;
	if (pages >= STORE_CHECKPOINT_PAGES)
		sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	return SQLITE_OK;
}

static void store_sync_fatal(const struct store *st, const char *what, int err)
{
	log_kv(LOG_LVL_ERROR, "store_sync_failed", "what", what, "path", st->wal_path, "error",
	       strerror(err), (char *)NULL);
	abort();
}

/* fdatasync of the WAL, after checking that its name still leads to wal_fd's file. */
static void store_sync_wal(struct store *st)
{
	struct stat by_name, by_fd;

	if (stat(st->wal_path, &by_name) != 0)
		store_sync_fatal(st, "stat", errno);
	if (fstat(st->wal_fd, &by_fd) != 0)
		store_sync_fatal(st, "fstat", errno);
	if (by_name.st_dev != by_fd.st_dev || by_name.st_ino != by_fd.st_ino)
		store_sync_fatal(st, "the WAL was replaced", ESTALE);
	if (fdatasync(st->wal_fd) != 0)
		store_sync_fatal(st, "fdatasync", errno);
}

/*
 * With st->mu held once: returns when the first want commits are durable.
 * Either this thread syncs (st->mu released meanwhile, so others go on
 * committing), or it waits for a sync that covers its commits: the one
 * running if it does, else the next. A sync that ends wakes only the threads
 * it covers, and one of those waiting for the next, which starts it; the
 * others sleep on until that one ends (a broadcast to all woke each waiter
 * once per sync, mostly to find it had to wait again).
 */
static void store_wait_durable(struct store *st, uint64_t want)
{
	while (st->durable < want) {
		if (st->syncing) {
			unsigned p = (unsigned)((st->syncs + (want > st->sync_upto)) % 2);
			st->waiting[p]++;
			if (pthread_cond_wait(&st->synced_cv[p], &st->mu) != 0)
				abort();
			st->waiting[p]--;
			continue;
		}
		st->sync_upto = st->committed;
		st->syncing = true;
		if (pthread_mutex_unlock(&st->mu) != 0)
			abort();
		store_sync_wal(st);
		if (pthread_mutex_lock(&st->mu) != 0)
			abort();
		st->syncing = false;
		if (st->sync_upto > st->durable)
			st->durable = st->sync_upto;
		if (pthread_cond_broadcast(&st->synced_cv[st->syncs % 2]) != 0)
			abort();
		st->syncs++;
		if (st->waiting[st->syncs % 2] &&
		    pthread_cond_signal(&st->synced_cv[st->syncs % 2]) != 0)
			abort();
	}
}

/*
 * The commits this thread has read past, in a hold that wrote nothing,
 * without waiting for them (store_wait_read), and the store they are of.
 */
static _Thread_local const struct store *read_store;
static _Thread_local uint64_t read_upto;

void store_lock(struct store *st)
{
	if (pthread_mutex_lock(&st->mu) != 0)
		abort();
	if (st->depth++ == 0)
		st->entry_committed = st->committed;
}

void store_unlock(struct store *st)
{
	if (--st->depth == 0 && st->durable < st->committed && st->wal_fd >= 0) {
		if (st->committed > st->entry_committed) {
			/* It wrote: durable before it returns. */
			store_wait_durable(st, st->committed);
		} else if (read_store != st || read_upto < st->committed) {
			/* It only read: durable before the answer (store_wait_read). */
			read_store = st;
			read_upto = st->committed;
		}
	}
	if (pthread_mutex_unlock(&st->mu) != 0)
		abort();
}

void store_unlock_unsynced(struct store *st)
{
	--st->depth; /* an outer hold, if any, waits as usual */
	if (pthread_mutex_unlock(&st->mu) != 0)
		abort();
}

void store_sync_all(struct store *st)
{
	if (pthread_mutex_lock(&st->mu) != 0)
		abort();
	if (st->durable < st->committed && st->wal_fd >= 0)
		store_wait_durable(st, st->committed);
	if (pthread_mutex_unlock(&st->mu) != 0)
		abort();
}

void store_wait_read(struct store *st)
{
	if (pthread_mutex_lock(&st->mu) != 0)
		abort();
	if (read_store == st && st->durable < read_upto && st->wal_fd >= 0)
		store_wait_durable(st, read_upto);
	read_store = NULL;
	read_upto = 0;
	if (pthread_mutex_unlock(&st->mu) != 0)
		abort();
}

int store_sync_open(struct store *st, const char *path)
{
	char *dir, *slash;
	int fd;

	if (asprintf(&st->wal_path, "%s-wal", path) < 0)
		abort();
	/* A read makes sqlite open (and, for a new database, create) the WAL. */
	if (store_exec(st, "SELECT count(*) FROM sqlite_schema", "store open: wal") != STORE_OK)
		return STORE_ERROR;
	st->wal_fd = open(st->wal_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (st->wal_fd < 0) {
		store_set_error("store open %s: %s", st->wal_path, strerror(errno));
		return STORE_ERROR;
	}
	/* The WAL's name may be new: make it durable once, with the directory. */
	dir = store_xstrdup(path);
	slash = strrchr(dir, '/');
	if (slash)
		slash[slash == dir] = '\0';
	fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) != 0) {
		store_set_error("store open %s: directory sync: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		free(dir);
		return STORE_ERROR;
	}
	close(fd);
	free(dir);
	sqlite3_wal_hook(st->db, store_wal_hook, st);
	return STORE_OK;
}

void store_sync_close(struct store *st)
{
	if (st->wal_fd >= 0)
		close(st->wal_fd);
	st->wal_fd = -1;
	free(st->wal_path);
	st->wal_path = NULL;
}

void store_sync_counts(struct store *st, uint64_t *commits, uint64_t *syncs)
{
	store_lock(st);
	*commits = st->committed;
	*syncs = st->syncs;
	store_unlock(st);
}
