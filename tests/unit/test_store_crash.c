/*
 * Unit tests for what the store gives crash recovery: intents (put, get,
 * replace, delete, list order, persistence, the migration from schema 2),
 * transactions (commit, rollback, misuse, nesting of the calls that write
 * several rows, other threads waiting), and the refusal of damaged files at
 * open (garbage, a truncated store, a junk page, a damaged index, a damaged
 * file with an unfinished WAL beside it), which leaves the file as it was,
 * and store_check(). Every database lives in a fresh mkdtemp directory under
 * /tmp that is removed at the end.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "store.h"
#include "store_testutil.h"
#include "tap.h"

static int put_intent(struct store *st, const char *key, const char *op, const char *object_id,
                      const char *detail)
{
	struct store_intent in = {
	    .key = (char *)key,
	    .op = (char *)op,
	    .object_id = (char *)object_id,
	    .detail = (char *)detail,
	    .created_at = 12345, /* ignored: put sets it */
	};
	return store_intent_put(st, &in);
}

/* The keys of every intent, oldest first, each followed by ' '. */
static const char *intent_keys(struct store *st, char *buf, size_t len)
{
	struct store_intent **l = (struct store_intent **)1;
	size_t n = 99, i, o = 0;

	buf[0] = '\0';
	if (store_intent_list(st, &l, &n) != STORE_OK)
		return "(list failed)";
	for (i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s ", l[i]->key);
	store_intent_list_free(l, n);
	return buf;
}

static void test_intents(void)
{
	char p[256], keys[256];
	const char *path = tpath(p, sizeof p, "intents.db");
	struct store *st = open_ok(path);
	struct store_intent *in = (struct store_intent *)1, **l = (struct store_intent **)1;
	time_t before = time(NULL), after;
	size_t n = 99;

	CHECK(store_intent_list(st, &l, &n) == STORE_OK && l == NULL && n == 0);
	CHECK(put_intent(st, "create:pvc-1", "create", "sv-1", "size=1048576") == STORE_OK);
	after = time(NULL);
	CHECK(store_intent_get(st, "create:pvc-1", &in) == STORE_OK && in);
	CHECK(in && strcmp(in->key, "create:pvc-1") == 0 && strcmp(in->op, "create") == 0 &&
	      strcmp(in->object_id, "sv-1") == 0 && strcmp(in->detail, "size=1048576") == 0);
	CHECK(in && in->created_at >= before && in->created_at <= after);
	store_intent_free(in);

	/* NULL object_id and detail read back as "". */
	CHECK(put_intent(st, "stage:sv-2", "stage", NULL, NULL) == STORE_OK);
	CHECK(store_intent_get(st, "stage:sv-2", &in) == STORE_OK && in);
	CHECK(in && strcmp(in->object_id, "") == 0 && strcmp(in->detail, "") == 0);
	store_intent_free(in);

	CHECK(store_intent_get(st, "create:nothing", &in) == STORE_NOTFOUND && in == NULL);
	CHECK(strstr(store_last_error(), "intent get") != NULL);
	CHECK(store_intent_delete(st, "create:nothing") == STORE_OK);

	/* key and op are required; bad calls change nothing. */
	CHECK(put_intent(st, NULL, "create", "x", "") == STORE_ERROR);
	CHECK(put_intent(st, "", "create", "x", "") == STORE_ERROR);
	CHECK(put_intent(st, "k", NULL, "x", "") == STORE_ERROR);
	CHECK(put_intent(st, "k", "", "x", "") == STORE_ERROR);
	CHECK(store_intent_put(st, NULL) == STORE_ERROR);
	CHECK(store_intent_put(NULL, NULL) == STORE_ERROR);
	CHECK(store_intent_get(st, NULL, &in) == STORE_ERROR && in == NULL);
	CHECK(store_intent_get(st, "k", NULL) == STORE_ERROR);
	CHECK(store_intent_delete(st, NULL) == STORE_ERROR);
	CHECK(store_intent_list(st, NULL, &n) == STORE_ERROR);
	CHECK(store_intent_list(NULL, &l, &n) == STORE_ERROR && l == NULL && n == 0);
	CHECK(strcmp(intent_keys(st, keys, sizeof keys), "create:pvc-1 stage:sv-2 ") == 0);

	/* Oldest first; a replaced intent is new (and has the new values); delete any. */
	CHECK(put_intent(st, "snapshot:snap-3", "snapshot", "ss-3", "{\"src\":\"sv-1\"}") ==
	      STORE_OK);
	CHECK(put_intent(st, "create:pvc-1", "create", "sv-1", "size=2097152") == STORE_OK);
	CHECK(strcmp(intent_keys(st, keys, sizeof keys),
	             "stage:sv-2 snapshot:snap-3 create:pvc-1 ") == 0);
	CHECK(store_intent_get(st, "create:pvc-1", &in) == STORE_OK && in &&
	      strcmp(in->detail, "size=2097152") == 0);
	store_intent_free(in);
	CHECK(store_intent_delete(st, "snapshot:snap-3") == STORE_OK);
	CHECK(store_intent_delete(st, "snapshot:snap-3") == STORE_OK);
	/* Deleting the newest and putting another: the new one is still the newest. */
	CHECK(store_intent_delete(st, "create:pvc-1") == STORE_OK);
	CHECK(put_intent(st, "delete:sv-9", "delete", "sv-9", "") == STORE_OK);
	CHECK(put_intent(st, "expand:sv-2", "expand", "sv-2", "to=3") == STORE_OK);
	CHECK(strcmp(intent_keys(st, keys, sizeof keys), "stage:sv-2 delete:sv-9 expand:sv-2 ") ==
	      0);

	/* Input is bound, never spliced into SQL. */
	CHECK(put_intent(st, "create:x'); DROP TABLE intents; --", "create", "'", "\"") ==
	      STORE_OK);
	CHECK(store_intent_delete(st, "create:x'); DROP TABLE intents; --") == STORE_OK);

	/* Kept across close and open, in the same order. */
	store_close(st);
	st = open_ok(path);
	CHECK(strcmp(intent_keys(st, keys, sizeof keys), "stage:sv-2 delete:sv-9 expand:sv-2 ") ==
	      0);
	CHECK(store_intent_get(st, "expand:sv-2", &in) == STORE_OK && in &&
	      strcmp(in->op, "expand") == 0 && strcmp(in->detail, "to=3") == 0 &&
	      in->created_at >= before);
	store_intent_free(in);
	store_intent_free(NULL);
	store_intent_list_free(NULL, 0);
	store_close(st);
}

/*
 * A store as schema 2 left it (schema 3 adds the intents table, schema 4 the
 * stagings' mount_group, schema 5 directory volumes) gains them all; its
 * stagings have no group.
 */
static void test_intents_migrate_from_v2(void)
{
	char p[256], keys[64];
	const char *path = tpath(p, sizeof p, "v2.db");
	struct store_volume *v = NULL;
	struct store *st = open_ok(path);

	CHECK(put_vol(st, "vol-v2", "pvc-v2") == STORE_OK);
	struct store_staging sg = {.volume_id = (char *)"vol-v2",
	                           .staging_path = (char *)"/s",
	                           .fs_type = (char *)"ext4",
	                           .mount_flags = (char *)"",
	                           .access_type = 2,
	                           .access_mode = 1,
	                           .mount_group = 1000};
	CHECK(store_staging_put(st, &sg) == STORE_OK);
	store_close(st);
	CHECK(sql_exec(path, STORE_TEST_UNDO_V5
	               "DROP TABLE intents; ALTER TABLE stagings DROP COLUMN mount_group; "
	               "PRAGMA user_version = 2;") == SQLITE_OK);
	CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'intents'") == 0);

	st = open_ok(path);
	CHECK(store_volume_get(st, "vol-v2", &v) == STORE_OK && v);
	store_volume_free(v);
	struct store_staging **all = NULL;
	size_t n = 0;
	CHECK(store_staging_list(st, &all, &n) == STORE_OK && n == 1 &&
	      strcmp(all[0]->staging_path, "/s") == 0 && all[0]->mount_group == 0);
	store_staging_list_free(all, n);
	CHECK(put_intent(st, "delete:vol-v2", "delete", "vol-v2", "") == STORE_OK);
	CHECK(strcmp(intent_keys(st, keys, sizeof keys), "delete:vol-v2 ") == 0);
	store_close(st);
	CHECK(sql_int(path, "PRAGMA user_version") == STORE_TEST_SCHEMA);
}

static struct store_snapshot member(const char *id)
{
	return (struct store_snapshot){.id = (char *)id,
	                               .source_volume_id = (char *)"vol-t",
	                               .size_bytes = 1,
	                               .fs_type = (char *)"ext4",
	                               .created_unix_ns = 1};
}

static void test_transactions(void)
{
	char p[256], keys[128];
	const char *path = tpath(p, sizeof p, "txn.db");
	struct store *st = open_ok(path);
	struct store_group_snapshot g = {.id = (char *)"grp-1", .name = (char *)"grp-name"};
	struct store_group_snapshot *gg = NULL;
	struct store_snapshot m[2] = {member("gm-1"), member("gm-2")}, **ml = NULL;
	struct store_volume *v = NULL;
	size_t n = 0;

	/* Commit: the row is written and the intent removed, together. */
	CHECK(put_intent(st, "create:pvc-t", "create", "vol-t", "") == STORE_OK);
	CHECK(store_begin(st) == STORE_OK);
	CHECK(put_vol(st, "vol-t", "pvc-t") == STORE_OK);
	CHECK(store_intent_delete(st, "create:pvc-t") == STORE_OK);
	CHECK(store_commit(st) == STORE_OK);
	CHECK(store_volume_get(st, "vol-t", &v) == STORE_OK);
	store_volume_free(v);
	CHECK(strcmp(intent_keys(st, keys, sizeof keys), "") == 0);

	/* Rollback: neither happened. */
	CHECK(put_intent(st, "create:pvc-r", "create", "vol-r", "") == STORE_OK);
	CHECK(store_begin(st) == STORE_OK);
	CHECK(put_vol(st, "vol-r", "pvc-r") == STORE_OK);
	CHECK(store_intent_delete(st, "create:pvc-r") == STORE_OK);
	CHECK(store_volume_count(st, &n) == STORE_OK && n == 2); /* seen inside */
	store_rollback(st);
	CHECK(store_volume_get(st, "vol-r", &v) == STORE_NOTFOUND);
	CHECK(strcmp(intent_keys(st, keys, sizeof keys), "create:pvc-r ") == 0);

	/* A failing call inside leaves the transaction open with the rest of it. */
	CHECK(store_begin(st) == STORE_OK);
	CHECK(put_vol(st, "vol-r", "pvc-r") == STORE_OK);
	CHECK(put_vol(st, "vol-t", "pvc-t") == STORE_EXISTS);
	CHECK(store_intent_delete(st, "create:pvc-r") == STORE_OK);
	CHECK(store_commit(st) == STORE_OK);
	CHECK(store_volume_count(st, &n) == STORE_OK && n == 2);
	CHECK(strcmp(intent_keys(st, keys, sizeof keys), "") == 0);

	/* The calls that write several rows nest, as a whole, inside a transaction. */
	CHECK(store_begin(st) == STORE_OK);
	CHECK(store_group_snapshot_put(st, &g, m, 2) == STORE_OK);
	CHECK(put_intent(st, "snapshot:grp-name", "snapshot", "grp-1", "") == STORE_OK);
	store_rollback(st);
	CHECK(store_group_snapshot_get(st, "grp-1", &gg) == STORE_NOTFOUND);
	CHECK(store_snapshot_list_group(st, "grp-1", &ml, &n) == STORE_OK && n == 0);
	store_snapshot_list_free(ml, n);
	CHECK(store_begin(st) == STORE_OK);
	CHECK(put_intent(st, "snapshot:grp-name", "snapshot", "grp-1", "") == STORE_OK);
	m[1].id = (char *)"gm-1"; /* a duplicate member: the group put fails as a whole */
	CHECK(store_group_snapshot_put(st, &g, m, 2) == STORE_EXISTS);
	CHECK(store_group_snapshot_get(st, "grp-1", &gg) == STORE_NOTFOUND);
	m[1].id = (char *)"gm-2";
	CHECK(store_group_snapshot_put(st, &g, m, 2) == STORE_OK);
	CHECK(store_group_snapshot_delete(st, "no-such-group") == STORE_NOTFOUND);
	CHECK(store_commit(st) == STORE_OK);
	CHECK(store_group_snapshot_get(st, "grp-1", &gg) == STORE_OK && gg);
	store_group_snapshot_free(gg);
	CHECK(strcmp(intent_keys(st, keys, sizeof keys), "snapshot:grp-name ") == 0);
	CHECK(store_begin(st) == STORE_OK);
	CHECK(store_group_snapshot_delete(st, "grp-1") == STORE_OK);
	CHECK(store_intent_delete(st, "snapshot:grp-name") == STORE_OK);
	CHECK(store_commit(st) == STORE_OK);
	CHECK(store_group_snapshot_get(st, "grp-1", &gg) == STORE_NOTFOUND);

	/* Misuse: no nesting, no commit without begin; rollback without one does nothing. */
	CHECK(store_commit(st) == STORE_ERROR);
	CHECK(strstr(store_last_error(), "no transaction") != NULL);
	store_rollback(st);
	store_rollback(NULL);
	CHECK(store_begin(NULL) == STORE_ERROR && store_commit(NULL) == STORE_ERROR);
	CHECK(store_begin(st) == STORE_OK);
	CHECK(store_begin(st) == STORE_ERROR);
	CHECK(strstr(store_last_error(), "already") != NULL);
	CHECK(put_vol(st, "vol-n", "pvc-n") == STORE_OK);
	CHECK(store_commit(st) == STORE_OK); /* the first transaction, still whole */
	CHECK(store_commit(st) == STORE_ERROR);

	/* Committed means on disk: another connection sees it after close. */
	store_close(st);
	CHECK(sql_int(path, "SELECT count(*) FROM volumes") == 3);
	CHECK(sql_int(path, "SELECT count(*) FROM intents") == 0);
}

struct reader {
	struct store *st;
	atomic_int started;
	int rc; /* of store_volume_get("vol-x") */
};

static void *reader_run(void *arg)
{
	struct reader *r = arg;
	struct store_volume *v = NULL;

	atomic_store(&r->started, 1);
	r->rc = store_volume_get(r->st, "vol-x", &v);
	store_volume_free(v);
	return NULL;
}

/*
 * Another thread's call waits for the transaction to end: it never sees a row
 * that the transaction wrote and then rolled back, although it is started
 * (and given time to run) while the row exists.
 */
static void test_transaction_excludes_others(void)
{
	char p[256];
	struct store *st = open_ok(tpath(p, sizeof p, "txn-threads.db"));
	struct reader r = {.st = st, .rc = -1};
	pthread_t t;
	int i;

	CHECK(store_begin(st) == STORE_OK);
	CHECK(put_vol(st, "vol-x", "pvc-x") == STORE_OK);
	CHECK(pthread_create(&t, NULL, reader_run, &r) == 0);
	for (i = 0; i < 1000 && !atomic_load(&r.started); i++)
		tap_sleep_ms(1);
	tap_sleep_ms(50); /* the reader's chance to run inside it, if the lock let it */
	store_rollback(st);
	pthread_join(t, NULL);
	CHECK(r.rc == STORE_NOTFOUND);
	store_close(st);
}

/* Writes len bytes of junk at offset into path. */
static int scribble(const char *path, off_t offset, size_t len)
{
	char junk[4096];
	size_t i;
	int fd, ok;

	for (i = 0; i < sizeof junk; i++)
		junk[i] = (char)(i * 131 + 17);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ok = len <= sizeof junk && pwrite(fd, junk, len, offset) == (ssize_t)len;
	close(fd);
	return ok ? 0 : -1;
}

/* A closed store of nvol volumes (each staged) at path; returns its size in pages. */
static long filled_store(const char *path, int nvol)
{
	struct store *st = open_ok(path);
	char id[32], name[32], staging[64];
	int i;

	CHECK(store_begin(st) == STORE_OK);
	for (i = 0; i < nvol; i++) {
		struct store_staging s = {.volume_id = id,
		                          .staging_path = staging,
		                          .fs_type = (char *)"ext4",
		                          .mount_flags = (char *)"",
		                          .access_type = 2,
		                          .access_mode = 1};

		snprintf(id, sizeof id, "vol-%05d", i);
		snprintf(name, sizeof name, "pvc-%05d", i);
		snprintf(staging, sizeof staging, "/var/lib/kubelet/staging/%05d", i);
		CHECK(put_vol(st, id, name) == STORE_OK);
		CHECK(store_staging_put(st, &s) == STORE_OK);
	}
	CHECK(store_commit(st) == STORE_OK);
	store_close(st);
	return (long)sql_int(path, "PRAGMA page_count");
}

/*
 * store_open() refuses path with an error that names it and contains want;
 * path (and its WAL, if it has one) keeps every byte; store_check() refuses it too.
 */
static void refused_as_found(const char *path, const char *want)
{
	char wal[300], msg[512];
	size_t len = 0, len2 = 0, wlen = 0, wlen2 = 0;
	char *before = read_all(path, &len), *after;
	char *wbefore, *wafter;
	struct store *st = (struct store *)1;

	snprintf(wal, sizeof wal, "%s-wal", path);
	wbefore = read_all(wal, &wlen);
	CHECK(store_open(path, &st) == STORE_ERROR && st == NULL);
	if (!strstr(store_last_error(), path) || !strstr(store_last_error(), want))
		fprintf(stderr, "store_open %s: want '%s', got: %s\n", path, want,
		        store_last_error());
	CHECK(strstr(store_last_error(), path) != NULL);
	CHECK(strstr(store_last_error(), want) != NULL);
	after = read_all(path, &len2);
	CHECK(before && after && len == len2 && memcmp(before, after, len) == 0);
	wafter = read_all(wal, &wlen2);
	CHECK((wbefore == NULL) == (wafter == NULL) && wlen == wlen2 &&
	      (!wbefore || memcmp(wbefore, wafter, wlen) == 0));

	CHECK(store_check(path, msg, sizeof msg) == STORE_ERROR);
	CHECK(strstr(msg, path) != NULL && strstr(msg, "store check") != NULL);
	free(before);
	free(after);
	free(wbefore);
	free(wafter);
}

static void test_damaged_files(void)
{
	char p[256], junk[65536];
	const char *path;
	long pages;
	int64_t root;
	size_t i;
	pid_t pid;
	int status = -1;

	/* Garbage the size of a small store. */
	for (i = 0; i < sizeof junk; i++)
		junk[i] = (char)(i * 7 + i / 251);
	path = tpath(p, sizeof p, "garbage.db");
	CHECK(write_file(path, junk, sizeof junk) == 0);
	refused_as_found(path, "not a sqlite database");

	/* Truncated to half its pages, and to a size that is not a whole page. */
	path = tpath(p, sizeof p, "truncated.db");
	pages = filled_store(path, 1000);
	CHECK(pages > 20);
	CHECK(truncate(path, pages / 2 * 4096) == 0);
	refused_as_found(path, "damaged");
	CHECK(truncate(path, pages / 4 * 4096 + 1000) == 0);
	refused_as_found(path, "damaged");

	/* A page of junk in the middle of a valid store. */
	path = tpath(p, sizeof p, "junkpage.db");
	pages = filled_store(path, 1000);
	CHECK(scribble(path, (off_t)(pages / 2) * 4096, 4096) == 0);
	refused_as_found(path, "damaged");

	/*
	 * One changed byte in an index (a name) and nowhere else: every page
	 * reads as well-formed, only the check of the index against its table
	 * finds it. Without it, a lookup by that name would find no volume.
	 */
	path = tpath(p, sizeof p, "index.db");
	filled_store(path, 20);
	root = sql_int(path, "SELECT rootpage FROM sqlite_master WHERE type = 'index' AND "
	                     "tbl_name = 'volumes' AND name != 'sqlite_autoindex_volumes_1'");
	CHECK(root > 1);
	{
		size_t len = 0;
		char *db = read_all(path, &len), *hit = NULL;
		size_t at = (size_t)(root - 1) * 4096;

		if (db && at + 4096 <= len)
			hit = memmem(db + at, 4096, "pvc-00007", 9);
		CHECK(hit != NULL);
		if (hit) {
			hit[8] = '8'; /* "pvc-00007" reads "pvc-00008" in the index only */
			CHECK(write_file(path, db, len) == 0);
		}
		free(db);
	}
	refused_as_found(path, "damaged");

	/*
	 * A damaged store whose last writer died with committed rows in its WAL:
	 * those rows are not copied into the refused file, and the WAL stays.
	 */
	path = tpath(p, sizeof p, "walcrash.db");
	pages = filled_store(path, 1000);
	pid = fork();
	if (pid == 0) {
		struct store *st = NULL;

		if (store_open(path, &st) != STORE_OK || put_vol(st, "zz-1", "zz-1") != STORE_OK)
			_exit(1);
		_exit(0); /* no store_close(): the WAL keeps its frames */
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && status == 0);
	{
		char wal[300];
		struct stat sb;

		snprintf(wal, sizeof wal, "%s-wal", path);
		CHECK(stat(wal, &sb) == 0 && sb.st_size > 0);
	}
	CHECK(scribble(path, (off_t)(pages / 2) * 4096, 4096) == 0);
	refused_as_found(path, "damaged");
}

static void test_store_check(void)
{
	char p[256], msg[512], wal[300], shm[300];
	const char *path;
	struct store *st;
	char tiny[8];

	CHECK(store_check(tpath(p, sizeof p, "absent.db"), msg, sizeof msg) == STORE_NOTFOUND);
	CHECK(strstr(msg, "absent.db") != NULL);
	path = tpath(p, sizeof p, "check.db");
	snprintf(wal, sizeof wal, "%s-wal", path);
	snprintf(shm, sizeof shm, "%s-shm", path);

	/* Next to an open store (a running rpcd), with rows in its WAL. */
	st = open_ok(path);
	CHECK(put_vol(st, "vol-c", "pvc-c") == STORE_OK);
	CHECK(put_intent(st, "create:pvc-d", "create", "vol-d", "") == STORE_OK);
	CHECK(store_check(path, msg, sizeof msg) == STORE_OK && strcmp(msg, "ok") == 0);
	CHECK(store_check(path, tiny, sizeof tiny) == STORE_OK && strcmp(tiny, "ok") == 0);
	CHECK(store_check(path, NULL, 0) == STORE_OK);
	CHECK(put_vol(st, "vol-d", "pvc-d") == STORE_OK); /* the writer goes on */
	store_close(st);

	/* Closed: read as it is, and no -wal or -shm file appears. */
	CHECK(access(wal, F_OK) != 0 && access(shm, F_OK) != 0);
	CHECK(store_check(path, msg, sizeof msg) == STORE_OK && strcmp(msg, "ok") == 0);
	CHECK(access(wal, F_OK) != 0 && access(shm, F_OK) != 0);

	/* What store_open() refuses, it refuses too; a short buffer gets the start. */
	CHECK(sql_exec(path, "PRAGMA user_version = 99") == SQLITE_OK);
	CHECK(store_check(path, msg, sizeof msg) == STORE_ERROR && strstr(msg, "newer") != NULL);
	CHECK(store_check(path, tiny, sizeof tiny) == STORE_ERROR &&
	      strlen(tiny) == sizeof tiny - 1 && strncmp(tiny, "store c", 7) == 0);
	CHECK(store_check(tmpdir, msg, sizeof msg) == STORE_ERROR &&
	      strstr(msg, "not a regular file") != NULL);
	CHECK(store_check(NULL, msg, sizeof msg) == STORE_ERROR);
	CHECK(store_check(path, NULL, 4) == STORE_ERROR);
}

int main(void)
{
	scratch_begin();
	test_intents();
	test_intents_migrate_from_v2();
	test_transactions();
	test_transaction_excludes_others();
	test_damaged_files();
	test_store_check();
	return scratch_end("test_store_crash");
}
