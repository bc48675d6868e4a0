/*
 * Unit tests for store/: persistence across reopen, migrations, unique keys,
 * NOTFOUND, keyset pagination under concurrent change, stagings and
 * publications, foreign keys refusing a volume delete, refusal of files that
 * are not a sepcsi store, concurrent writers, the migration from schema 1,
 * snapshots (outliving their volume), group snapshots written and forgotten
 * atomically, and controller attachments. Every database lives in a
 * fresh mkdtemp directory under /tmp that is removed at the end. Intents,
 * transactions and damaged files: test_store_crash.c.
 */
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "store_testutil.h"
#include "tap.h"

static void test_create_reopen(void)
{
	char p[256];
	const char *path = tpath(p, sizeof p, "basic.db");
	struct store_volume *v = NULL;
	struct store *st;
	struct stat sb;
	int64_t objects;
	size_t n = 0;
	int i;

	st = open_ok(path);
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
	CHECK(put_vol(st, "vol-1", "pvc-1") == STORE_OK);
	store_close(st);

	CHECK(sql_int(path, "PRAGMA user_version") == STORE_TEST_SCHEMA);
	{
		sqlite3 *db = NULL;
		sqlite3_stmt *q = NULL;
		const unsigned char *mode = NULL;

		CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
		CHECK(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL) == SQLITE_OK);
		CHECK(sqlite3_step(q) == SQLITE_ROW && (mode = sqlite3_column_text(q, 0)) != NULL);
		CHECK(mode && strcmp((const char *)mode, "wal") == 0);
		sqlite3_finalize(q);
		sqlite3_close(db);
	}
	objects = sql_int(path, "SELECT count(*) FROM sqlite_master");
	CHECK(objects > 0);

	/* Reopening migrates nothing again and keeps the data. */
	for (i = 0; i < 3; i++) {
		st = open_ok(path);
		CHECK(store_volume_count(st, &n) == STORE_OK && n == 1);
		CHECK(store_volume_get(st, "vol-1", &v) == STORE_OK);
		CHECK(v && strcmp(v->id, "vol-1") == 0 && strcmp(v->name, "pvc-1") == 0);
		CHECK(v && v->capacity_bytes == INT64_C(1) << 30);
		CHECK(v && strcmp(v->fs_type, "ext4") == 0 &&
		      strcmp(v->parameters, "a=1\nb=2\n") == 0);
		CHECK(v && strcmp(v->content_source, "") == 0);
		CHECK(v && v->created_unix_ns == INT64_C(1700000000123456789));
		store_volume_free(v);
		v = NULL;
		store_close(st);
		CHECK(sql_int(path, "PRAGMA user_version") == STORE_TEST_SCHEMA);
		CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master") == objects);
	}
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);

	st = open_ok(path);
	CHECK(store_volume_get_by_name(st, "pvc-1", &v) == STORE_OK && v &&
	      strcmp(v->id, "vol-1") == 0);
	store_volume_free(v);
	store_close(st);
	store_close(NULL);
}

static void test_keys_and_notfound(void)
{
	char p[256];
	struct store *st = open_ok(tpath(p, sizeof p, "keys.db"));
	struct store_volume *v = (struct store_volume *)1;
	struct store_staging *s = (struct store_staging *)1;
	struct store_publication *pub = (struct store_publication *)1;
	struct store_volume bad = {0};
	size_t n;

	CHECK(put_vol(st, "vol-a", "name-a") == STORE_OK);
	CHECK(put_vol(st, "vol-a", "name-other") == STORE_EXISTS);
	CHECK(strstr(store_last_error(), "volume put") != NULL);
	CHECK(put_vol(st, "vol-other", "name-a") == STORE_EXISTS);
	CHECK(store_volume_count(st, &n) == STORE_OK && n == 1);

	CHECK(store_volume_get(st, "missing", &v) == STORE_NOTFOUND && v == NULL);
	CHECK(store_volume_get_by_name(st, "missing", &v) == STORE_NOTFOUND && v == NULL);
	CHECK(store_volume_delete(st, "missing") == STORE_NOTFOUND);
	CHECK(store_staging_get(st, "vol-a", &s) == STORE_NOTFOUND && s == NULL);
	CHECK(store_staging_delete(st, "vol-a") == STORE_NOTFOUND);
	CHECK(store_publication_get(st, "vol-a", "/t", &pub) == STORE_NOTFOUND && pub == NULL);
	CHECK(store_publication_delete(st, "vol-a", "/t") == STORE_NOTFOUND);
	CHECK(store_publication_count(st, "vol-a", &n) == STORE_OK && n == 0);

	/* A missing required field is refused by the schema, not stored as NULL. */
	bad.id = (char *)"vol-bad";
	CHECK(store_volume_put(st, &bad) == STORE_ERROR);
	CHECK(store_last_error()[0] != '\0');
	CHECK(store_volume_put(st, NULL) == STORE_ERROR);

	/* Input is bound, never spliced into SQL. */
	CHECK(put_vol(st, "x'); DROP TABLE volumes; --", "quote-name") == STORE_OK);
	CHECK(store_volume_get(st, "x'); DROP TABLE volumes; --", &v) == STORE_OK && v);
	store_volume_free(v);
	CHECK(store_volume_count(st, &n) == STORE_OK && n == 2);

	CHECK(store_volume_delete(st, "vol-a") == STORE_OK);
	CHECK(store_volume_delete(st, "vol-a") == STORE_NOTFOUND);
	CHECK(put_vol(st, "vol-a2", "name-a") == STORE_OK); /* the name is free again */
	store_close(st);
}

static int ids_increasing(struct store_volume **l, size_t n, const char *after)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(l[i]->id, i ? l[i - 1]->id : after) <= 0)
			return 0;
	return 1;
}

/* The number in a test volume id "vol-NNN..." (0 to 249), checked. */
static int vol_num(const char *id)
{
	char *end;
	long v = strtol(id + 4, &end, 10);
	CHECK(end != id + 4 && v >= 0 && v < 250);
	return v >= 0 && v < 250 ? (int)v : 0;
}

static void test_list(void)
{
	char p[256], id[32], name[32], cursor[32];
	struct store *st = open_ok(tpath(p, sizeof p, "list.db"));
	struct store_volume **l = NULL;
	int seen[250] = {0};
	size_t n = 0, total = 0, pages = 0, i;
	int k, ok, dup, extra_hi = 0, extra_lo = 0;

	/* Inserted out of order (97 is coprime with 250). */
	for (k = 0; k < 250; k++) {
		int j = (k * 97) % 250;

		snprintf(id, sizeof id, "vol-%03d", j);
		snprintf(name, sizeof name, "pvc-%03d", j);
		CHECK(put_vol(st, id, name) == STORE_OK);
	}
	CHECK(store_volume_count(st, &n) == STORE_OK && n == 250);

	/* Plain paging: 100, 100, 50, then an empty page. */
	cursor[0] = '\0';
	ok = 1;
	for (;;) {
		CHECK(store_volume_list(st, cursor, 100, &l, &n) == STORE_OK);
		if (n == 0) {
			CHECK(l == NULL);
			break;
		}
		pages++;
		ok &= ids_increasing(l, n, cursor);
		for (i = 0; i < n; i++)
			seen[vol_num(l[i]->id)]++;
		total += n;
		CHECK(n == (pages < 3 ? 100u : 50u));
		snprintf(cursor, sizeof cursor, "%s", l[n - 1]->id);
		store_volume_list_free(l, n);
	}
	CHECK(ok && pages == 3 && total == 250);
	for (k = 0, ok = 1; k < 250; k++)
		ok &= seen[k] == 1;
	CHECK(ok);

	/* limit 0: everything at once. NULL after_id: from the start. */
	CHECK(store_volume_list(st, NULL, 0, &l, &n) == STORE_OK && n == 250);
	CHECK(ids_increasing(l, n, ""));
	store_volume_list_free(l, n);

	/* The cursor's own row is deleted before the next page: paging goes on. */
	CHECK(store_volume_list(st, "", 100, &l, &n) == STORE_OK && n == 100);
	snprintf(cursor, sizeof cursor, "%s", l[99]->id);
	CHECK(strcmp(cursor, "vol-099") == 0);
	store_volume_list_free(l, n);
	CHECK(store_volume_delete(st, cursor) == STORE_OK);
	CHECK(store_volume_list(st, cursor, 100, &l, &n) == STORE_OK && n == 100);
	CHECK(n && strcmp(l[0]->id, "vol-100") == 0 && strcmp(l[99]->id, "vol-199") == 0);
	store_volume_list_free(l, n);

	/* Rows added between pages, before and after the cursor: nothing repeats. */
	memset(seen, 0, sizeof seen);
	CHECK(store_volume_list(st, "", 60, &l, &n) == STORE_OK && n == 60);
	for (i = 0; i < n; i++)
		seen[vol_num(l[i]->id)]++;
	snprintf(cursor, sizeof cursor, "%s", l[n - 1]->id);
	store_volume_list_free(l, n);
	ok = 1;
	for (k = 0; k < 5; k++) {
		snprintf(id, sizeof id, "vol-%03d-lo%d", k * 10, k); /* sorts before the cursor */
		snprintf(name, sizeof name, "lo-%d", k);
		CHECK(put_vol(st, id, name) == STORE_OK);
		snprintf(id, sizeof id, "vol-%03d-hi%d", 150 + k * 10, k); /* after it */
		snprintf(name, sizeof name, "hi-%d", k);
		CHECK(put_vol(st, id, name) == STORE_OK);
		CHECK(store_volume_list(st, cursor, 60, &l, &n) == STORE_OK);
		if (n == 0)
			break;
		ok &= ids_increasing(l, n, cursor);
		for (i = 0; i < n; i++) {
			if (strchr(l[i]->id + 4, '-')) {
				extra_hi += strstr(l[i]->id, "-hi") != NULL;
				extra_lo += strstr(l[i]->id, "-lo") != NULL;
			} else {
				seen[vol_num(l[i]->id)]++;
			}
		}
		snprintf(cursor, sizeof cursor, "%s", l[n - 1]->id);
		store_volume_list_free(l, n);
	}
	CHECK(store_volume_list(st, cursor, 60, &l, &n) == STORE_OK && n == 0);
	CHECK(ok);
	for (k = 0, dup = 0, ok = 1; k < 250; k++) {
		dup |= seen[k] > 1;
		ok &= seen[k] == (k == 99 ? 0 : 1);
	}
	CHECK(!dup && ok);
	CHECK(extra_lo == 0); /* inserted behind the cursor: not seen, not repeated */
	CHECK(extra_hi >= 1 && extra_hi <= 5); /* ahead of it: seen once at most */
	CHECK(store_volume_count(st, &n) == STORE_OK && n == 249 + 10);
	store_close(st);
}

static void test_node_tables(void)
{
	char p[256];
	struct store *st = open_ok(tpath(p, sizeof p, "node.db"));
	struct store_staging stg = {
	    .volume_id = (char *)"vol-n",
	    .staging_path = (char *)"/var/lib/kubelet/plugins/x/globalmount",
	    .fs_type = (char *)"xfs",
	    .mount_flags = (char *)"noatime,nodev,nosuid",
	    .access_type = 2,
	    .access_mode = 7,
	};
	struct store_publication pub = {
	    .volume_id = (char *)"vol-n",
	    .target_path = (char *)"/var/lib/kubelet/pods/a/mount",
	    .staging_path = stg.staging_path,
	    .readonly = true,
	    .access_type = 2,
	    .access_mode = 7,
	    .mount_flags = (char *)"nodev,nosuid,ro",
	};
	struct store_staging *s = NULL;
	struct store_publication *g = NULL;
	size_t n = 9;

	CHECK(store_staging_put(st, &stg) == STORE_ERROR); /* no such volume yet */
	CHECK(strstr(store_last_error(), "no such volume") != NULL);
	CHECK(store_publication_put(st, &pub) == STORE_ERROR);
	CHECK(put_vol(st, "vol-n", "pvc-n") == STORE_OK);

	CHECK(store_staging_put(st, &stg) == STORE_OK);
	CHECK(store_staging_put(st, &stg) == STORE_EXISTS);
	CHECK(store_staging_get(st, "vol-n", &s) == STORE_OK && s);
	CHECK(s && strcmp(s->volume_id, "vol-n") == 0 &&
	      strcmp(s->staging_path, stg.staging_path) == 0 && strcmp(s->fs_type, "xfs") == 0 &&
	      strcmp(s->mount_flags, stg.mount_flags) == 0 && s->access_type == 2 &&
	      s->access_mode == 7);
	store_staging_free(s);
	store_staging_free(NULL);

	CHECK(store_publication_put(st, &pub) == STORE_OK);
	CHECK(store_publication_put(st, &pub) == STORE_EXISTS);
	pub.target_path = (char *)"/var/lib/kubelet/pods/b/mount";
	pub.readonly = false;
	CHECK(store_publication_put(st, &pub) == STORE_OK);
	CHECK(store_publication_count(st, "vol-n", &n) == STORE_OK && n == 2);
	CHECK(store_publication_count(st, "vol-other", &n) == STORE_OK && n == 0);
	CHECK(store_publication_get(st, "vol-n", "/var/lib/kubelet/pods/a/mount", &g) == STORE_OK);
	CHECK(g && g->readonly && strcmp(g->target_path, "/var/lib/kubelet/pods/a/mount") == 0 &&
	      strcmp(g->staging_path, stg.staging_path) == 0 && g->access_type == 2 &&
	      g->access_mode == 7 && strcmp(g->mount_flags, "nodev,nosuid,ro") == 0);
	store_publication_free(g);
	CHECK(store_publication_get(st, "vol-n", "/var/lib/kubelet/pods/b/mount", &g) == STORE_OK);
	CHECK(g && !g->readonly);
	store_publication_free(g);
	store_publication_free(NULL);

	/* The volume cannot go while anything references it. */
	CHECK(store_volume_delete(st, "vol-n") == STORE_ERROR);
	CHECK(strstr(store_last_error(), "staged or published") != NULL);
	CHECK(store_staging_delete(st, "vol-n") == STORE_OK);
	CHECK(store_staging_delete(st, "vol-n") == STORE_NOTFOUND);
	CHECK(store_volume_delete(st, "vol-n") == STORE_ERROR); /* still published */
	CHECK(store_publication_delete(st, "vol-n", "/var/lib/kubelet/pods/a/mount") == STORE_OK);
	CHECK(store_publication_delete(st, "vol-n", "/var/lib/kubelet/pods/a/mount") ==
	      STORE_NOTFOUND);
	CHECK(store_publication_count(st, "vol-n", &n) == STORE_OK && n == 1);
	CHECK(store_volume_delete(st, "vol-n") == STORE_ERROR);
	CHECK(store_publication_delete(st, "vol-n", "/var/lib/kubelet/pods/b/mount") == STORE_OK);
	CHECK(store_volume_delete(st, "vol-n") == STORE_OK);
	CHECK(store_volume_get(st, "vol-n", &(struct store_volume *){NULL}) == STORE_NOTFOUND);
	store_close(st);
}

static void test_bad_files(void)
{
	char p[256], junk[4096], back[4096];
	struct store *st = (struct store *)1;
	const char *path;
	size_t i;
	int fd;

	/* Garbage: refused, and left byte for byte as it was. */
	for (i = 0; i < sizeof junk; i++)
		junk[i] = (char)(i * 31 + 7);
	path = tpath(p, sizeof p, "junk.db");
	CHECK(write_file(path, junk, sizeof junk) == 0);
	CHECK(store_open(path, &st) == STORE_ERROR && st == NULL);
	CHECK(strstr(store_last_error(), "not a sqlite database") != NULL);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && read(fd, back, sizeof back) == (ssize_t)sizeof back);
	CHECK(memcmp(junk, back, sizeof junk) == 0);
	if (fd >= 0)
		close(fd);

	/* A short text file. */
	path = tpath(p, sizeof p, "text.db");
	CHECK(write_file(path, "hello, this is not sqlite at all\n", 33) == 0);
	CHECK(store_open(path, &st) == STORE_ERROR && st == NULL);

	/* Some other program's sqlite database. */
	path = tpath(p, sizeof p, "foreign.db");
	CHECK(sql_exec(path, "CREATE TABLE t(x); INSERT INTO t VALUES (1);") == SQLITE_OK);
	CHECK(store_open(path, &st) == STORE_ERROR && st == NULL);
	CHECK(strstr(store_last_error(), "not a sepcsi store") != NULL);
	CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master") == 1);

	/* A store written by a newer sepcsi. */
	path = tpath(p, sizeof p, "newer.db");
	st = open_ok(path);
	store_close(st);
	CHECK(sql_exec(path, "PRAGMA user_version = 99") == SQLITE_OK);
	CHECK(store_open(path, &st) == STORE_ERROR && st == NULL);
	CHECK(strstr(store_last_error(), "newer") != NULL);

	/* A directory, a missing parent directory, no path at all. */
	CHECK(store_open(tmpdir, &st) == STORE_ERROR && st == NULL);
	CHECK(store_open(tpath(p, sizeof p, "nodir/x.db"), &st) == STORE_ERROR && st == NULL);
	CHECK(store_open("", &st) == STORE_ERROR && st == NULL);
	CHECK(store_open(NULL, &st) == STORE_ERROR);
}

#define NTHREADS   4
#define PER_THREAD 200

struct worker {
	struct store *st;
	int index;
	int failures;
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	struct store_volume *v;
	char id[32], name[32];
	size_t n;
	int i;

	for (i = 0; i < PER_THREAD; i++) {
		snprintf(id, sizeof id, "thr%d-%03d", w->index, i);
		snprintf(name, sizeof name, "pvc-thr%d-%03d", w->index, i);
		if (put_vol(w->st, id, name) != STORE_OK) {
			fprintf(stderr, "worker %d put: %s\n", w->index, store_last_error());
			w->failures++;
		}
		v = NULL;
		if (store_volume_get_by_name(w->st, name, &v) != STORE_OK || strcmp(v->id, id) != 0)
			w->failures++;
		store_volume_free(v);
		if (i % 50 == 0 && store_volume_count(w->st, &n) != STORE_OK)
			w->failures++;
	}
	/* This thread's error text is its own. */
	if (store_volume_get(w->st, "no-such", &v) != STORE_NOTFOUND ||
	    strstr(store_last_error(), "no such volume") == NULL)
		w->failures++;
	return NULL;
}

static void test_threads(void)
{
	char p[256];
	struct store *st = open_ok(tpath(p, sizeof p, "threads.db"));
	struct worker w[NTHREADS];
	pthread_t t[NTHREADS];
	struct store_volume **l = NULL;
	size_t n = 0;
	int i, started = 0;

	CHECK(put_vol(st, "dup", "dup") == STORE_OK);
	CHECK(put_vol(st, "dup", "dup") == STORE_EXISTS); /* main thread's error text */
	for (i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){.st = st, .index = i};
		if (pthread_create(&t[i], NULL, worker_run, &w[i]) == 0)
			started++;
	}
	CHECK(started == NTHREADS);
	for (i = 0; i < started; i++) {
		pthread_join(t[i], NULL);
		CHECK(w[i].failures == 0);
	}
	CHECK(strstr(store_last_error(), "volume put") != NULL);
	CHECK(store_volume_delete(st, "dup") == STORE_OK);
	CHECK(store_volume_count(st, &n) == STORE_OK && n == (size_t)NTHREADS * PER_THREAD);
	CHECK(store_volume_list(st, "", 0, &l, &n) == STORE_OK &&
	      n == (size_t)NTHREADS * PER_THREAD);
	CHECK(ids_increasing(l, n, ""));
	store_volume_list_free(l, n);
	/* Group commit: every commit was made durable, by at most one fdatasync each. */
	uint64_t commits, syncs;
	store_sync_counts(st, &commits, &syncs);
	CHECK(commits >= (uint64_t)NTHREADS * PER_THREAD + 2);
	CHECK(syncs >= 1 && syncs <= commits);
	printf("# %d threads: %" PRIu64 " commits made durable by %" PRIu64 " fdatasyncs\n",
	       NTHREADS, commits, syncs);
	store_close(st);
}

/*
 * One thread: each call that writes returns only after its own fdatasync of
 * the WAL; a call that only reads, with nothing waiting, syncs nothing; and
 * sqlite itself never syncs at commit (synchronous=NORMAL), so the store's
 * sync is the one that makes a commit durable.
 */
static void test_group_commit(void)
{
	char p[256];
	struct store *st = open_ok(tpath(p, sizeof p, "sync.db"));
	struct store_volume *v = NULL;
	uint64_t c0, s0, c1, s1;
	sqlite3 *db;
	sqlite3_stmt *q;

	store_sync_counts(st, &c0, &s0);
	CHECK(c0 >= 1 && s0 >= 1 && s0 <= c0); /* open: the migrations' commits, made durable */
	CHECK(put_vol(st, "gc-1", "pvc-gc-1") == STORE_OK);
	store_sync_counts(st, &c1, &s1);
	CHECK(c1 == c0 + 1 && s1 == s0 + 1);
	CHECK(store_volume_get(st, "gc-1", &v) == STORE_OK);
	store_volume_free(v);
	store_wait_read(st); /* it read only durable rows: nothing to wait for */
	store_sync_counts(st, &c0, &s0);
	CHECK(c0 == c1 && s0 == s1);
	CHECK(store_volume_delete(st, "gc-1") == STORE_OK);
	store_sync_counts(st, &c0, &s0);
	CHECK(c0 == c1 + 1 && s0 == s1 + 1);
	/* A failed write commits nothing, so it waits for nothing. */
	CHECK(put_vol(st, "gc-2", "pvc-gc-2") == STORE_OK);
	CHECK(put_vol(st, "gc-2", "pvc-gc-2") == STORE_EXISTS);
	store_sync_counts(st, &c1, &s1);
	CHECK(c1 == c0 + 1 && s1 == s0 + 1);
	store_close(st);
	/* What was written is there after close and reopen (through sqlite alone). */
	CHECK(sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
	CHECK(sqlite3_prepare_v2(db, "SELECT count(*) FROM volumes WHERE id = 'gc-2'", -1, &q,
	                         NULL) == SQLITE_OK &&
	      sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) == 1);
	sqlite3_finalize(q);
	sqlite3_close(db);
}

/*
 * An intent until reboot is committed without a sync of its own; the next
 * write that waits makes it durable with itself, in one sync. An ordinary
 * intent syncs before it returns.
 */
static void test_intent_until_reboot(void)
{
	char p[256];
	struct store *st = open_ok(tpath(p, sizeof p, "reboot.db"));
	struct store_intent in = {.key = "stage:v1", .op = "stage", .object_id = "v1"};
	struct store_intent *got = NULL;
	uint64_t c0, s0, c1, s1;

	store_sync_counts(st, &c0, &s0);
	CHECK(store_intent_put_until_reboot(st, &in) == STORE_OK);
	store_sync_counts(st, &c1, &s1);
	CHECK(c1 == c0 + 1 && s1 == s0);
	CHECK(store_intent_get(st, "stage:v1", &got) == STORE_OK && strcmp(got->op, "stage") == 0);
	store_intent_free(got);
	CHECK(store_intent_delete(st, "stage:v1") == STORE_OK);
	store_sync_counts(st, &c0, &s0);
	CHECK(c0 == c1 + 1 && s0 == s1 + 1);
	in.key = "create:pvc-1";
	in.op = "create";
	CHECK(store_intent_put(st, &in) == STORE_OK);
	store_sync_counts(st, &c1, &s1);
	CHECK(c1 == c0 + 1 && s1 == s0 + 1);
	store_close(st);
}

/* A store as schema 1 left it: the migrations from it keep its rows and add defaults. */
static void test_migrate_from_v1(void)
{
	char p[256];
	const char *path = tpath(p, sizeof p, "v1.db");
	struct store_volume *v = NULL;
	struct store *st;

	CHECK(sql_exec(
	          path,
	          "PRAGMA journal_mode = WAL;"
	          "CREATE TABLE volumes (id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL UNIQUE,"
	          " capacity_bytes INTEGER NOT NULL, fs_type TEXT NOT NULL,"
	          " parameters TEXT NOT NULL, content_source TEXT NOT NULL,"
	          " created_unix_ns INTEGER NOT NULL) STRICT;"
	          "CREATE TABLE stagings (volume_id TEXT PRIMARY KEY NOT NULL REFERENCES"
	          " volumes(id), staging_path TEXT NOT NULL, fs_type TEXT NOT NULL,"
	          " mount_flags TEXT NOT NULL, access_type INTEGER NOT NULL,"
	          " access_mode INTEGER NOT NULL) STRICT;"
	          "CREATE TABLE publications (volume_id TEXT NOT NULL REFERENCES volumes(id),"
	          " target_path TEXT NOT NULL, staging_path TEXT NOT NULL,"
	          " readonly INTEGER NOT NULL, access_type INTEGER NOT NULL,"
	          " access_mode INTEGER NOT NULL, mount_flags TEXT NOT NULL,"
	          " PRIMARY KEY (volume_id, target_path)) STRICT;"
	          "PRAGMA application_id = 1936027747;"
	          "INSERT INTO volumes VALUES ('vol-old', 'pvc-old', 1048576, 'xfs', '', '', 5);"
	          "PRAGMA user_version = 1;") == SQLITE_OK);
	st = open_ok(path);
	CHECK(store_volume_get(st, "vol-old", &v) == STORE_OK && v);
	CHECK(v && strcmp(v->fs_type, "xfs") == 0 && strcmp(v->mkfs_options, "") == 0 &&
	      !v->nouuid && strcmp(v->mutable_parameters, "") == 0 &&
	      strcmp(v->condition, "") == 0);
	store_volume_free(v);
	store_close(st);
	CHECK(sql_int(path, "PRAGMA user_version") == STORE_TEST_SCHEMA);
	CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'snapshots'") == 1);
	CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'intents'") == 1);
}

/* The columns added in schema 2, and store_volume_update. */
static void test_volume_extras(void)
{
	char p[256];
	struct store *st = open_ok(tpath(p, sizeof p, "extras.db"));
	struct store_volume v = {
	    .id = (char *)"vol-x",
	    .name = (char *)"pvc-x",
	    .capacity_bytes = 300 << 20,
	    .fs_type = (char *)"xfs",
	    .parameters = (char *)"fsType=xfs\n",
	    .content_source = (char *)"snapshot:ss-1",
	    .created_unix_ns = 42,
	    .mkfs_options = (char *)"-m reflink=1",
	    .nouuid = true,
	    .mutable_parameters = (char *)"expandLimitBytes=1073741824\n",
	};
	struct store_volume *g = NULL;

	CHECK(store_volume_put(st, &v) == STORE_OK);
	CHECK(store_volume_get(st, "vol-x", &g) == STORE_OK && g);
	CHECK(g && strcmp(g->mkfs_options, "-m reflink=1") == 0 && g->nouuid &&
	      strcmp(g->mutable_parameters, "expandLimitBytes=1073741824\n") == 0 &&
	      strcmp(g->condition, "") == 0 && strcmp(g->content_source, "snapshot:ss-1") == 0);
	store_volume_free(g);
	v.capacity_bytes = 600 << 20;
	v.mutable_parameters = NULL;
	v.condition = (char *)"image missing";
	v.name = (char *)"ignored by update";
	CHECK(store_volume_update(st, &v) == STORE_OK);
	CHECK(store_volume_get(st, "vol-x", &g) == STORE_OK && g);
	CHECK(g && g->capacity_bytes == 600 << 20 && strcmp(g->mutable_parameters, "") == 0 &&
	      strcmp(g->condition, "image missing") == 0 && strcmp(g->name, "pvc-x") == 0);
	store_volume_free(g);
	v.id = (char *)"vol-none";
	CHECK(store_volume_update(st, &v) == STORE_NOTFOUND);
	CHECK(store_volume_update(st, NULL) == STORE_ERROR);
	store_close(st);
}

/*
 * A store as schema 4 left it (made from a schema 5 one by taking the step
 * away again): the migration to 5 keeps its rows as image volumes and
 * snapshots, and adds the directory index.
 */
static void test_migrate_from_v4(void)
{
	char p[256];
	const char *path = tpath(p, sizeof p, "v4.db");
	struct store_volume *v = NULL;
	struct store_snapshot *s = NULL;
	struct store *st = open_ok(path);

	store_close(st);
	CHECK(sql_exec(path, STORE_TEST_UNDO_V5
	               "INSERT INTO volumes (id, name, capacity_bytes, fs_type, parameters,"
	               " content_source, created_unix_ns) VALUES"
	               " ('vol-4', 'pvc-4', 1048576, 'ext4', '', '', 5);"
	               "INSERT INTO snapshots VALUES ('ss-4', 'snap-4', 'vol-4', 1048576,"
	               " 'ext4', '', '', 6);"
	               "PRAGMA user_version = 4;") == SQLITE_OK);
	CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name ="
	                    " 'volumes_by_directory'") == 0);
	st = open_ok(path);
	CHECK(store_volume_get(st, "vol-4", &v) == STORE_OK && v);
	CHECK(v && strcmp(v->kind, STORE_KIND_IMAGE) == 0 && strcmp(v->dir_base, "") == 0 &&
	      strcmp(v->dir_name, "") == 0 && strcmp(v->on_delete, "") == 0 && !v->quota);
	store_volume_free(v);
	CHECK(store_snapshot_get(st, "ss-4", &s) == STORE_OK && s);
	CHECK(s && strcmp(s->kind, STORE_KIND_IMAGE) == 0 && strcmp(s->dir_base, "") == 0);
	store_snapshot_free(s);
	store_close(st);
	CHECK(sql_int(path, "PRAGMA user_version") == STORE_TEST_SCHEMA);
	CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name ="
	                    " 'volumes_by_directory'") == 1);
}

/* Directory volumes: their columns, and one volume per directory of a base. */
static void test_directory_volumes(void)
{
	char p[256];
	struct store *st = open_ok(tpath(p, sizeof p, "dirs.db"));
	struct store_volume v = {
	    .id = (char *)"vol-d1",
	    .name = (char *)"pvc-d1",
	    .capacity_bytes = 1 << 30,
	    .fs_type = (char *)"",
	    .parameters = (char *)"baseDir=/srv/vols\ntype=directory\n",
	    .content_source = (char *)"",
	    .kind = (char *)STORE_KIND_DIRECTORY,
	    .dir_base = (char *)"/srv/vols",
	    .dir_name = (char *)"ns-claim",
	    .on_delete = (char *)"archive",
	    .quota = true,
	};
	struct store_volume *g = NULL;
	struct store_snapshot sn = {.id = (char *)"ss-d",
	                            .name = (char *)"snap-d",
	                            .source_volume_id = (char *)"vol-d1",
	                            .size_bytes = 1 << 30,
	                            .kind = (char *)STORE_KIND_DIRECTORY,
	                            .dir_base = (char *)"/srv/vols"},
	                      *gs = NULL;

	CHECK(store_volume_put(st, &v) == STORE_OK);
	CHECK(store_volume_get_by_directory(st, "/srv/vols", "ns-claim", &g) == STORE_OK && g);
	CHECK(g && strcmp(g->id, "vol-d1") == 0 && strcmp(g->kind, STORE_KIND_DIRECTORY) == 0 &&
	      strcmp(g->on_delete, "archive") == 0 && g->quota);
	store_volume_free(g);
	/* Another volume in the same directory of the same base is refused. */
	v.id = (char *)"vol-d2";
	v.name = (char *)"pvc-d2";
	CHECK(store_volume_put(st, &v) == STORE_EXISTS);
	/* The same name in another base, or another name, is another directory. */
	v.dir_base = (char *)"/srv/other";
	CHECK(store_volume_put(st, &v) == STORE_OK);
	v.id = (char *)"vol-d3";
	v.name = (char *)"pvc-d3";
	v.dir_base = (char *)"/srv/vols";
	v.dir_name = (char *)"ns-claim/sub";
	CHECK(store_volume_put(st, &v) == STORE_OK);
	CHECK(store_volume_get_by_directory(st, "/srv/vols", "nope", &g) == STORE_NOTFOUND && !g);
	/* Images have no directory: any number of them with "" / "". */
	CHECK(put_vol(st, "vol-i1", "pvc-i1") == STORE_OK);
	CHECK(put_vol(st, "vol-i2", "pvc-i2") == STORE_OK);
	CHECK(store_volume_get(st, "vol-i1", &g) == STORE_OK && g &&
	      strcmp(g->kind, STORE_KIND_IMAGE) == 0);
	store_volume_free(g);
	CHECK(store_volume_get_by_directory(st, "", "", &g) == STORE_NOTFOUND);
	/* Once deleted, its directory may be another volume's. */
	CHECK(store_volume_delete(st, "vol-d1") == STORE_OK);
	v.id = (char *)"vol-d4";
	v.name = (char *)"pvc-d4";
	v.dir_name = (char *)"ns-claim";
	CHECK(store_volume_put(st, &v) == STORE_OK);
	CHECK(store_snapshot_put(st, &sn) == STORE_OK);
	CHECK(store_snapshot_get(st, "ss-d", &gs) == STORE_OK && gs &&
	      strcmp(gs->kind, STORE_KIND_DIRECTORY) == 0 &&
	      strcmp(gs->dir_base, "/srv/vols") == 0);
	store_snapshot_free(gs);
	store_close(st);
}

static struct store_snapshot snap(const char *id, const char *name, const char *src)
{
	return (struct store_snapshot){
	    .id = (char *)id,
	    .name = (char *)name,
	    .source_volume_id = (char *)src,
	    .size_bytes = 1 << 30,
	    .fs_type = (char *)"ext4",
	    .parameters = (char *)"",
	    .created_unix_ns = 1700000000000000000LL,
	};
}

static void test_snapshots(void)
{
	char p[256], id[32], name[32], cursor[32] = "";
	struct store *st = open_ok(tpath(p, sizeof p, "snap.db"));
	struct store_snapshot s = snap("ss-a", "snap-a", "vol-s"), *g = (void *)1;
	struct store_snapshot **l = NULL;
	size_t n = 0, total = 0, i;
	int pages = 0;

	/* No foreign key: a snapshot of a volume that is gone (or never was here) is kept. */
	CHECK(put_vol(st, "vol-s", "pvc-s") == STORE_OK);
	CHECK(store_snapshot_put(st, &s) == STORE_OK);
	CHECK(store_snapshot_put(st, &s) == STORE_EXISTS);
	s.id = (char *)"ss-b";
	CHECK(store_snapshot_put(st, &s) == STORE_EXISTS); /* same name */
	CHECK(store_volume_delete(st, "vol-s") == STORE_OK);
	CHECK(store_snapshot_get(st, "ss-a", &g) == STORE_OK && g);
	CHECK(g && strcmp(g->name, "snap-a") == 0 && strcmp(g->source_volume_id, "vol-s") == 0 &&
	      g->size_bytes == 1 << 30 && strcmp(g->fs_type, "ext4") == 0 &&
	      strcmp(g->group_id, "") == 0 && g->created_unix_ns == 1700000000000000000LL);
	store_snapshot_free(g);
	CHECK(store_snapshot_get_by_name(st, "snap-a", &g) == STORE_OK && g &&
	      strcmp(g->id, "ss-a") == 0);
	store_snapshot_free(g);
	CHECK(store_snapshot_get_by_name(st, "nope", &g) == STORE_NOTFOUND && g == NULL);
	CHECK(store_snapshot_get_by_name(st, "", &g) == STORE_NOTFOUND && g == NULL);
	CHECK(store_snapshot_get(st, "ss-none", &g) == STORE_NOTFOUND && g == NULL);
	store_snapshot_free(NULL);

	/* 30 more of two sources; list all, by source, in pages. */
	for (i = 0; i < 30; i++) {
		snprintf(id, sizeof id, "ss-%03zu", i);
		snprintf(name, sizeof name, "snap-%03zu", i);
		s = snap(id, name, i % 3 ? "vol-p" : "vol-q");
		CHECK(store_snapshot_put(st, &s) == STORE_OK);
	}
	CHECK(store_snapshot_list(st, NULL, "", 0, &l, &n) == STORE_OK && n == 31);
	store_snapshot_list_free(l, n);
	CHECK(store_snapshot_list(st, "vol-q", "", 0, &l, &n) == STORE_OK && n == 10);
	for (i = 0; i < n; i++)
		CHECK(strcmp(l[i]->source_volume_id, "vol-q") == 0);
	store_snapshot_list_free(l, n);
	CHECK(store_snapshot_list(st, "vol-none", "", 0, &l, &n) == STORE_OK && n == 0);
	store_snapshot_list_free(l, n);
	for (;;) {
		CHECK(store_snapshot_list(st, "vol-p", cursor, 7, &l, &n) == STORE_OK);
		if (n == 0) {
			store_snapshot_list_free(l, n);
			break;
		}
		for (i = 0; i < n; i++)
			CHECK(strcmp(l[i]->id, i ? l[i - 1]->id : cursor) > 0);
		snprintf(cursor, sizeof cursor, "%s", l[n - 1]->id);
		total += n;
		pages++;
		store_snapshot_list_free(l, n);
	}
	CHECK(total == 20 && pages == 3);
	CHECK(store_snapshot_delete(st, "ss-a") == STORE_OK);
	CHECK(store_snapshot_delete(st, "ss-a") == STORE_NOTFOUND);
	CHECK(store_snapshot_put(st, NULL) == STORE_ERROR);
	store_close(st);
}

static void test_group_snapshots(void)
{
	char p[256];
	struct store *st = open_ok(tpath(p, sizeof p, "group.db"));
	struct store_group_snapshot grp = {
	    .id = (char *)"gs-1",
	    .name = (char *)"group-1",
	    .source_volume_ids = (char *)"vol-1\nvol-2\n",
	    .parameters = (char *)"",
	    .created_unix_ns = 7,
	};
	struct store_snapshot m[2] = {snap("ss-m1", "", "vol-1"), snap("ss-m2", "", "vol-2")};
	struct store_snapshot lone = snap("ss-lone", "lone", "vol-1"), **l = NULL, *s = NULL;
	struct store_group_snapshot *g = NULL;
	size_t n = 0;

	/* A member id that clashes: nothing of the group is written. */
	CHECK(store_snapshot_put(st, &lone) == STORE_OK);
	m[1].id = (char *)"ss-lone";
	CHECK(store_group_snapshot_put(st, &grp, m, 2) == STORE_EXISTS);
	CHECK(store_group_snapshot_get(st, "gs-1", &g) == STORE_NOTFOUND && g == NULL);
	CHECK(store_snapshot_get(st, "ss-m1", &s) == STORE_NOTFOUND);

	m[1].id = (char *)"ss-m2";
	CHECK(store_group_snapshot_put(st, &grp, m, 2) == STORE_OK);
	CHECK(store_group_snapshot_put(st, &grp, m, 0) == STORE_EXISTS);
	CHECK(store_group_snapshot_get(st, "gs-1", &g) == STORE_OK && g);
	CHECK(g && strcmp(g->name, "group-1") == 0 &&
	      strcmp(g->source_volume_ids, "vol-1\nvol-2\n") == 0 && g->created_unix_ns == 7);
	store_group_snapshot_free(g);
	CHECK(store_group_snapshot_get_by_name(st, "group-1", &g) == STORE_OK && g &&
	      strcmp(g->id, "gs-1") == 0);
	store_group_snapshot_free(g);
	CHECK(store_snapshot_list_group(st, "gs-1", &l, &n) == STORE_OK && n == 2);
	CHECK(n == 2 && strcmp(l[0]->id, "ss-m1") == 0 && strcmp(l[1]->group_id, "gs-1") == 0 &&
	      strcmp(l[1]->name, "") == 0);
	store_snapshot_list_free(l, n);
	/* Members are snapshots too: listed with the rest. */
	CHECK(store_snapshot_list(st, "vol-1", "", 0, &l, &n) == STORE_OK && n == 2);
	store_snapshot_list_free(l, n);

	CHECK(store_group_snapshot_delete(st, "gs-1") == STORE_OK);
	CHECK(store_group_snapshot_delete(st, "gs-1") == STORE_NOTFOUND);
	CHECK(store_snapshot_get(st, "ss-m2", &s) == STORE_NOTFOUND);
	CHECK(store_snapshot_get(st, "ss-lone", &s) == STORE_OK);
	store_snapshot_free(s);
	store_group_snapshot_free(NULL);
	store_close(st);
}

static void test_attachments(void)
{
	char p[256];
	struct store *st = open_ok(tpath(p, sizeof p, "attach.db"));
	struct store_attachment a = {
	    .volume_id = (char *)"vol-at",
	    .node_id = (char *)"node-1",
	    .readonly = true,
	    .access_type = 2,
	    .access_mode = 1,
	};
	struct store_attachment *g = NULL, **l = NULL;
	size_t n = 9;

	CHECK(store_attachment_put(st, &a) == STORE_ERROR); /* no such volume */
	CHECK(put_vol(st, "vol-at", "pvc-at") == STORE_OK);
	CHECK(store_attachment_put(st, &a) == STORE_OK);
	CHECK(store_attachment_put(st, &a) == STORE_EXISTS);
	a.node_id = (char *)"node-2";
	a.readonly = false;
	CHECK(store_attachment_put(st, &a) == STORE_OK);
	CHECK(store_attachment_get(st, "vol-at", "node-1", &g) == STORE_OK && g);
	CHECK(g && g->readonly && g->access_type == 2 && g->access_mode == 1 &&
	      strcmp(g->node_id, "node-1") == 0);
	store_attachment_free(g);
	CHECK(store_attachment_get(st, "vol-at", "node-3", &g) == STORE_NOTFOUND && g == NULL);
	CHECK(store_attachment_list(st, "vol-at", &l, &n) == STORE_OK && n == 2);
	CHECK(n == 2 && strcmp(l[0]->node_id, "node-1") == 0 && !l[1]->readonly);
	store_attachment_list_free(l, n);
	CHECK(store_attachment_count_node(st, "node-2", &n) == STORE_OK && n == 1);
	CHECK(store_attachment_count_node(st, "node-9", &n) == STORE_OK && n == 0);

	/* Attached: the volume cannot be deleted. */
	CHECK(store_volume_delete(st, "vol-at") == STORE_ERROR);
	CHECK(store_attachment_delete(st, "vol-at", "node-1") == STORE_OK);
	CHECK(store_attachment_delete(st, "vol-at", "node-1") == STORE_NOTFOUND);
	CHECK(put_vol(st, "vol-at2", "pvc-at2") == STORE_OK);
	a.volume_id = (char *)"vol-at2";
	CHECK(store_attachment_put(st, &a) == STORE_OK);
	CHECK(store_attachment_delete(st, "vol-at", NULL) == STORE_OK); /* every node */
	CHECK(store_attachment_delete(st, "vol-at", NULL) == STORE_NOTFOUND);
	CHECK(store_attachment_count_node(st, "node-2", &n) == STORE_OK && n == 1);
	CHECK(store_volume_delete(st, "vol-at") == STORE_OK);
	store_attachment_free(NULL);
	store_close(st);
}

int main(void)
{
	scratch_begin();
	test_create_reopen();
	test_keys_and_notfound();
	test_list();
	test_node_tables();
	test_bad_files();
	test_threads();
	test_group_commit();
	test_intent_until_reboot();
	test_migrate_from_v1();
	test_migrate_from_v4();
	test_volume_extras();
	test_directory_volumes();
	test_snapshots();
	test_group_snapshots();
	test_attachments();
	return scratch_end("test_store");
}
