/*
 * The store: opening the sqlite database, checking what is found there
 * (what kind of file, and sqlite's integrity check), the schema migrations,
 * closing it, and store_check(), which checks a store without writing. The
 * tables are in store_volume.c, store_node.c, store_ctl.c and store_intent.c;
 * transactions in store_txn.c; the helpers they share in store_sql.c.
 *
 * Runs in rpcd, unprivileged; rpcd is the only writer of this file. One sqlite
 * connection per store, serialised by a pthread mutex, in WAL mode with
 * group commit (store_sync.c: a committed row survives power loss before the
 * call that wrote it returns) and foreign keys on (a volume cannot be deleted
 * while a staging or publication names it).
 * Every query is a prepared statement with bound parameters: no SQL is ever
 * built from a caller's values.
 *
 * Fatal here (abort): allocation failure, including SQLITE_NOMEM, and a
 * pthread mutex call failing. Every other failure is returned as a STORE_*
 * code with the reason in store_last_error().
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_int.h"

/* How long one call waits for a lock held by another connection (e.g. an operator's sqlite3). */
#define STORE_BUSY_TIMEOUT_MS 5000

/* PRAGMA application_id of a sepcsi store: "sepc" in ASCII. */
#define STORE_APPLICATION_ID 0x73657063

/* How many problems an integrity check lists at most (a string: it goes into the pragma). */
#define STORE_CHECK_ROWS "20"

/*
 * Forward migrations: entry i takes the schema from version i to i + 1, and is
 * applied together with "PRAGMA user_version = i + 1" in one transaction.
 * Released entries are never edited; a schema change is a new entry.
 */
static const char *const store_migrations[] = {
    /* to version 1: volumes, stagings, publications */
    "CREATE TABLE volumes ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT NOT NULL UNIQUE,"
    "  capacity_bytes INTEGER NOT NULL,"
    "  fs_type TEXT NOT NULL,"
    "  parameters TEXT NOT NULL,"
    "  content_source TEXT NOT NULL,"
    "  created_unix_ns INTEGER NOT NULL"
    ") STRICT;"
    "CREATE TABLE stagings ("
    "  volume_id TEXT PRIMARY KEY NOT NULL REFERENCES volumes(id),"
    "  staging_path TEXT NOT NULL,"
    "  fs_type TEXT NOT NULL,"
    "  mount_flags TEXT NOT NULL,"
    "  access_type INTEGER NOT NULL,"
    "  access_mode INTEGER NOT NULL"
    ") STRICT;"
    "CREATE TABLE publications ("
    "  volume_id TEXT NOT NULL REFERENCES volumes(id),"
    "  target_path TEXT NOT NULL,"
    "  staging_path TEXT NOT NULL,"
    "  readonly INTEGER NOT NULL,"
    "  access_type INTEGER NOT NULL,"
    "  access_mode INTEGER NOT NULL,"
    "  mount_flags TEXT NOT NULL,"
    "  PRIMARY KEY (volume_id, target_path)"
    ") STRICT;"
    "PRAGMA application_id = 1936027747;", /* STORE_APPLICATION_ID in decimal */

    /*
     * to version 2: what the Controller service needs beyond the skeleton.
     * Snapshots have no foreign key to volumes: they outlive their source.
     * Member snapshots of a group have a NULL name (UNIQUE ignores NULLs).
     */
    "ALTER TABLE volumes ADD COLUMN mkfs_options TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE volumes ADD COLUMN nouuid INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE volumes ADD COLUMN mutable_parameters TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE volumes ADD COLUMN condition TEXT NOT NULL DEFAULT '';"
    "CREATE TABLE snapshots ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT UNIQUE,"
    "  source_volume_id TEXT NOT NULL,"
    "  size_bytes INTEGER NOT NULL,"
    "  fs_type TEXT NOT NULL,"
    "  parameters TEXT NOT NULL,"
    "  group_id TEXT NOT NULL,"
    "  created_unix_ns INTEGER NOT NULL"
    ") STRICT;"
    "CREATE INDEX snapshots_by_source ON snapshots (source_volume_id, id);"
    "CREATE INDEX snapshots_by_group ON snapshots (group_id, id);"
    "CREATE TABLE group_snapshots ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT NOT NULL UNIQUE,"
    "  source_volume_ids TEXT NOT NULL,"
    "  parameters TEXT NOT NULL,"
    "  created_unix_ns INTEGER NOT NULL"
    ") STRICT;"
    "CREATE TABLE attachments ("
    "  volume_id TEXT NOT NULL REFERENCES volumes(id),"
    "  node_id TEXT NOT NULL,"
    "  readonly INTEGER NOT NULL,"
    "  access_type INTEGER NOT NULL,"
    "  access_mode INTEGER NOT NULL,"
    "  PRIMARY KEY (volume_id, node_id)"
    ") STRICT;"
    "CREATE INDEX attachments_by_node ON attachments (node_id);",

    /*
     * to version 3: operations in progress. seq keeps the order they were
     * put in (created_at cannot: whole seconds of a clock that may step);
     * replacing an intent gives it a new seq. A declared INTEGER PRIMARY KEY,
     * unlike the implicit rowid, survives VACUUM unchanged.
     */
    "CREATE TABLE intents ("
    "  seq INTEGER PRIMARY KEY,"
    "  key TEXT NOT NULL UNIQUE,"
    "  op TEXT NOT NULL,"
    "  object_id TEXT NOT NULL,"
    "  detail TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL"
    ") STRICT;",

    /*
     * to version 4: the group a staging was mounted for (volume_mount_group,
     * 0 for none), so that a staging can be made again exactly as asked
     * after a reboot.
     */
    "ALTER TABLE stagings ADD COLUMN mount_group INTEGER NOT NULL DEFAULT 0;",

    /*
     * to version 5: directory volumes (a directory per volume beneath a base
     * directory, not an image). kind is 'image' or 'directory'; a directory
     * volume has its base, its name beneath it, what DeleteVolume does with
     * it (on_delete: 'delete', 'retain' or 'archive') and whether a project
     * quota enforces its capacity. No two directory volumes share a
     * directory: the partial unique index is what refuses the second. A
     * snapshot of a directory volume lives in its base's snapshot area, so
     * it records the kind and the base too.
     */
    "ALTER TABLE volumes ADD COLUMN kind TEXT NOT NULL DEFAULT 'image';"
    "ALTER TABLE volumes ADD COLUMN dir_base TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE volumes ADD COLUMN dir_name TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE volumes ADD COLUMN on_delete TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE volumes ADD COLUMN quota INTEGER NOT NULL DEFAULT 0;"
    "CREATE UNIQUE INDEX volumes_by_directory ON volumes (dir_base, dir_name)"
    "  WHERE kind = 'directory';"
    "ALTER TABLE snapshots ADD COLUMN kind TEXT NOT NULL DEFAULT 'image';"
    "ALTER TABLE snapshots ADD COLUMN dir_base TEXT NOT NULL DEFAULT '';",

    /*
     * to version 6: directory volumes on a base every node shares. shared is
     * 0 (a node-local volume), 1 (on a shared base, made by this driver's
     * Controller service) or 2 (on a shared base, made elsewhere: this node
     * learnt it from the volume_context of NodeStageVolume or
     * NodePublishVolume, and forgets it once it holds no staging of it).
     */
    "ALTER TABLE volumes ADD COLUMN shared INTEGER NOT NULL DEFAULT 0;",
};

#define STORE_SCHEMA_VERSION ((int64_t)(sizeof store_migrations / sizeof store_migrations[0]))

/* ---- what the file holds, and migrations ---- */

/*
 * Runs fixed SQL that returns one row; *out gets its first column as an
 * integer (0 on failure). Returns the sqlite result code (SQLITE_OK on
 * success), with store_last_error() set on failure.
 */
static int store_query_int(struct store *st, const char *sql, int64_t *out, const char *what)
{
	sqlite3_stmt *q = NULL;
	int rc;

	*out = 0;
	rc = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);
	if (rc != SQLITE_OK) {
		store_fail(st, rc, what);
		return rc;
	}
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(q, 0);
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		store_set_error("%s: no result", what);
		rc = SQLITE_ERROR;
	} else {
		store_fail(st, rc, what);
	}
	sqlite3_finalize(q);
	return rc;
}

/* st->mu is recursive: the owner of a store_begin() transaction holds it throughout. */
static void store_mutex_init(pthread_mutex_t *mu)
{
	pthread_mutexattr_t attr;

	if (pthread_mutexattr_init(&attr) != 0 ||
	    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE) != 0 ||
	    pthread_mutex_init(mu, &attr) != 0)
		abort();
	pthread_mutexattr_destroy(&attr);
}

/*
 * Creates the file with mode 0600 if it does not exist yet, so the database
 * never appears with a wider mode (sqlite gives the -wal and -shm files the
 * mode of the main file). An existing file is left as it is.
 */
static int store_create_file(const char *path)
{
	struct stat sb;
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0) {
		store_set_error("store open %s: %s", path, strerror(errno));
		return STORE_ERROR;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		store_set_error("store open %s: not a regular file", path);
		close(fd);
		return STORE_ERROR;
	}
	close(fd);
	return STORE_OK;
}

/*
 * Records "<what> <path>: <reason>" for a sqlite failure while reading what
 * the file holds, naming the reasons an operator can act on.
 */
static void store_read_error(struct store *st, int sqlite_rc, const char *what, const char *path)
{
	const char *msg = sqlite3_errmsg(st->db);

	if ((sqlite_rc & 0xff) == SQLITE_NOMEM)
		abort();
	if ((sqlite_rc & 0xff) == SQLITE_NOTADB)
		store_set_error("%s %s: not a sqlite database (%s)", what, path, msg);
	else if ((sqlite_rc & 0xff) == SQLITE_CORRUPT)
		store_set_error("%s %s: damaged (%s)", what, path, msg);
	else
		store_set_error("%s %s: cannot read it (%s)", what, path, msg);
}

/*
 * Refuses, before anything is written, a file that is not a sqlite database,
 * a sqlite database that is not a sepcsi store, and a store whose schema is
 * newer than this code knows. *version gets the schema version found.
 */
static int store_check_identity(struct store *st, const char *what, const char *path,
                                int64_t *version)
{
	int64_t app_id = 0, objects = 0;
	int rc;

	if ((rc = store_query_int(st, "PRAGMA user_version", version, what)) != SQLITE_OK ||
	    (rc = store_query_int(st, "PRAGMA application_id", &app_id, what)) != SQLITE_OK ||
	    (rc = store_query_int(st, "SELECT count(*) FROM sqlite_master", &objects, what)) !=
	        SQLITE_OK) {
		store_read_error(st, rc, what, path);
		return STORE_ERROR;
	}
	if (*version == 0 ? (app_id != 0 || objects != 0) : app_id != STORE_APPLICATION_ID) {
		store_set_error("%s %s: a sqlite database but not a sepcsi store "
		                "(application_id %" PRId64 ", user_version %" PRId64 ")",
		                what, path, app_id, *version);
		return STORE_ERROR;
	}
	if (*version > STORE_SCHEMA_VERSION) {
		store_set_error("%s %s: schema version %" PRId64
		                " is newer than this build knows (%" PRId64 ")",
		                what, path, *version, STORE_SCHEMA_VERSION);
		return STORE_ERROR;
	}
	return STORE_OK;
}

/*
 * Runs sqlite's integrity check of the whole file, before anything is
 * written: every page, every b-tree, and every index against its table (a
 * name index that lost an entry would let CreateVolume make a second volume
 * of one name, and quick_check does not look for that). It costs about 50-90
 * ms at 10,000 volumes (docs/benchmarks.md), once per start of rpcd. Any
 * problem is STORE_ERROR with "<what> <path>: damaged: <the first problem>
 * (and N more problems)".
 */
static int store_check_integrity(struct store *st, const char *what, const char *path)
{
	sqlite3_stmt *q = NULL;
	char first[256] = "";
	int rc, problems = 0;

	/* At most STORE_CHECK_ROWS problems are listed; one is enough to refuse the file. */
	rc = sqlite3_prepare_v2(st->db, "PRAGMA integrity_check(" STORE_CHECK_ROWS ")", -1, &q,
	                        NULL);
	if (rc == SQLITE_OK) {
		while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
			const char *t = (const char *)sqlite3_column_text(q, 0);

			if (t && strcmp(t, "ok") == 0)
				continue;
			if (problems++ == 0)
				snprintf(first, sizeof first, "%s", t ? t : "(no text)");
		}
	}
	if (rc != SQLITE_DONE) {
		store_read_error(st, rc, what, path);
		sqlite3_finalize(q);
		return STORE_ERROR;
	}
	sqlite3_finalize(q);
	if (problems == 1)
		store_set_error("%s %s: damaged: %s", what, path, first);
	else if (problems > 1)
		store_set_error("%s %s: damaged: %s (and %d more problems)", what, path, first,
		                problems - 1);
	return problems ? STORE_ERROR : STORE_OK;
}

/*
 * WAL, synchronous=NORMAL (store_sync.c makes each commit durable), foreign
 * keys: each read back, since each is part of the contract.
 */
static int store_configure(struct store *st, const char *path)
{
	sqlite3_stmt *q = NULL;
	const char *mode;
	int64_t v;
	int rc;

	rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &q, NULL);
	if (rc != SQLITE_OK) {
		store_fail(st, rc, "store open: journal_mode");
		return STORE_ERROR;
	}
	rc = sqlite3_step(q);
	if (rc != SQLITE_ROW) {
		store_fail(st, rc, "store open: journal_mode");
		sqlite3_finalize(q);
		return STORE_ERROR;
	}
	mode = (const char *)sqlite3_column_text(q, 0);
	if (!mode || strcasecmp(mode, "wal") != 0) {
		store_set_error("store open %s: cannot use WAL journal mode (got %s)", path,
		                mode ? mode : "nothing");
		sqlite3_finalize(q);
		return STORE_ERROR;
	}
	sqlite3_finalize(q);

	if (store_exec(st, "PRAGMA synchronous = NORMAL", "store open: synchronous") != STORE_OK ||
	    store_exec(st, "PRAGMA foreign_keys = ON", "store open: foreign_keys") != STORE_OK)
		return STORE_ERROR;
	if (store_query_int(st, "PRAGMA synchronous", &v, "store open") != SQLITE_OK)
		return STORE_ERROR;
	if (v != 1) {
		store_set_error("store open %s: synchronous is %" PRId64 ", not NORMAL", path, v);
		return STORE_ERROR;
	}
	if (store_query_int(st, "PRAGMA foreign_keys", &v, "store open") != SQLITE_OK)
		return STORE_ERROR;
	if (v != 1) {
		store_set_error("store open %s: sqlite cannot enforce foreign keys", path);
		return STORE_ERROR;
	}
	return STORE_OK;
}

/*
 * Applies the missing migrations in one write transaction. The version is read
 * again inside it: another process may have migrated since the identity check.
 */
static int store_migrate(struct store *st, const char *path)
{
	char pragma[64];
	int64_t v;

	if (store_exec(st, "BEGIN IMMEDIATE", "store migrate: begin") != STORE_OK)
		return STORE_ERROR;
	if (store_query_int(st, "PRAGMA user_version", &v, "store migrate") != SQLITE_OK)
		goto fail;
	if (v < 0 || v > STORE_SCHEMA_VERSION) {
		store_set_error("store open %s: schema version %" PRId64
		                " is not one this build knows",
		                path, v);
		goto fail;
	}
	for (; v < STORE_SCHEMA_VERSION; v++) {
		/* The number is ours, from the table's length; pragmas take no parameters. */
		snprintf(pragma, sizeof pragma, "PRAGMA user_version = %" PRId64, v + 1);
		if (store_exec(st, store_migrations[v], "store migrate") != STORE_OK ||
		    store_exec(st, pragma, "store migrate: user_version") != STORE_OK)
			goto fail;
	}
	if (store_exec(st, "COMMIT", "store migrate: commit") != STORE_OK)
		goto fail;
	return STORE_OK;
fail:
	/* Keep the first error's text: the rollback's outcome is secondary. */
	sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	return STORE_ERROR;
}

/* ---- checking, opening and closing ---- */

/*
 * A sqlite URI for opening path read-only, with each byte a URI path may not
 * hold percent-encoded. immutable: sqlite is told that nobody changes the
 * file, so it creates no -wal or -shm file beside it.
 */
static char *store_readonly_uri(const char *path, bool immutable)
{
	static const char hex[] = "0123456789ABCDEF";
	static const char head[] = "file:", ro[] = "?mode=ro", imm[] = "&immutable=1";
	char *uri = store_xcalloc(sizeof head + strlen(path) * 3 + sizeof ro + sizeof imm, 1);
	char *o = uri;
	const unsigned char *p;

	memcpy(o, head, sizeof head - 1);
	o += sizeof head - 1;
	for (p = (const unsigned char *)path; *p; p++) {
		if (*p == '%' || *p == '?' || *p == '#' || *p < 0x21 || *p > 0x7e) {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 0xf];
		} else {
			*o++ = (char)*p;
		}
	}
	memcpy(o, ro, sizeof ro - 1);
	o += sizeof ro - 1;
	if (immutable)
		memcpy(o, imm, sizeof imm - 1);
	return uri; /* NUL-terminated: the buffer was zeroed and is one byte longer than needed */
}

/*
 * The checks of store_open() and store_check(), made through a read-only
 * connection of their own, so that a file they refuse is never opened for
 * writing: nothing is written into it or its WAL, and no -wal or -shm file
 * is created beside it.
 *
 * Without a WAL file no writer has the store open (rpcd removes it when it
 * closes the store), and a plain read-only connection would create -wal and
 * -shm files, with this process's owner: the file is read as immutable then.
 * A writer that starts meanwhile changes the main file only when it
 * checkpoints, not within this check. With a WAL file, the check reads as
 * one more reader beside the writer (if any), and sees the last committed
 * state, that of the WAL included.
 */
static int store_verify(const char *path, const char *what)
{
	struct store st = {.db = NULL}; /* only its connection is used: no lock, no statements */
	char *wal = NULL, *uri;
	int64_t version;
	int rc = STORE_ERROR;

	if (asprintf(&wal, "%s-wal", path) < 0)
		abort();
	uri = store_readonly_uri(path, access(wal, F_OK) != 0);
	if (sqlite3_open_v2(uri, &st.db,
	                    SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
	                    NULL) != SQLITE_OK) {
		if (!st.db)
			abort(); /* sqlite could not allocate the connection */
		store_set_error("%s %s: %s", what, path, sqlite3_errmsg(st.db));
		goto out;
	}
	sqlite3_extended_result_codes(st.db, 1);
	sqlite3_busy_timeout(st.db, STORE_BUSY_TIMEOUT_MS);
	if (store_check_identity(&st, what, path, &version) == STORE_OK &&
	    store_check_integrity(&st, what, path) == STORE_OK)
		rc = STORE_OK;
out:
	sqlite3_close_v2(st.db);
	free(uri);
	free(wal);
	return rc;
}

int store_check(const char *path, char *msg, size_t cap)
{
	static const char what[] = "store check";
	struct stat sb;
	int rc = STORE_ERROR;

	if (!path || !*path || (!msg && cap)) {
		store_set_error("%s: invalid argument", what);
	} else if (stat(path, &sb) != 0) {
		store_set_error("%s %s: %s", what, path, strerror(errno));
		rc = errno == ENOENT ? STORE_NOTFOUND : STORE_ERROR;
	} else if (!S_ISREG(sb.st_mode)) {
		store_set_error("%s %s: not a regular file", what, path);
	} else {
		rc = store_verify(path, what);
	}
	if (msg && cap)
		snprintf(msg, cap, "%s", rc == STORE_OK ? "ok" : store_last_error());
	return rc;
}

int store_open(const char *path, struct store **out)
{
	struct store *st;
	int64_t version = 0;
	int rc;

	if (!out || !path || !*path) {
		store_set_error("store open: invalid argument");
		return STORE_ERROR;
	}
	*out = NULL;
	if (!sqlite3_threadsafe()) {
		store_set_error("store open: sqlite3 was built without thread support");
		return STORE_ERROR;
	}
	if (store_create_file(path) != STORE_OK || store_verify(path, "store open") != STORE_OK)
		return STORE_ERROR;

	st = store_xcalloc(1, sizeof *st);
	store_mutex_init(&st->mu);
	if (pthread_cond_init(&st->synced_cv[0], NULL) != 0 ||
	    pthread_cond_init(&st->synced_cv[1], NULL) != 0)
		abort();
	st->wal_fd = -1;
	/* NOMUTEX: st->mu already serialises every use of the connection. */
	rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		if (!st->db)
			abort(); /* sqlite could not allocate the connection */
		store_set_error("store open %s: %s", path, sqlite3_errmsg(st->db));
		goto fail;
	}
	sqlite3_extended_result_codes(st->db, 1);
	sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);

	/* Read again on this connection: the version decides the migrations. */
	if (store_check_identity(st, "store open", path, &version) != STORE_OK ||
	    store_configure(st, path) != STORE_OK || store_sync_open(st, path) != STORE_OK)
		goto fail;
	if (version < STORE_SCHEMA_VERSION && store_migrate(st, path) != STORE_OK)
		goto fail;
	store_sync_all(st); /* the migrations' commits */
	*out = st;
	return STORE_OK;
fail:
	/* Leave the file as it was found: closing would otherwise copy its WAL into it. */
	sqlite3_db_config(st->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
	store_close(st);
	return STORE_ERROR;
}

void store_close(struct store *st)
{
	size_t i;

	if (!st)
		return;
	for (i = 0; i < STMT__COUNT; i++)
		sqlite3_finalize(st->stmt[i]);
	/* Every statement is finalised, so this closes now (and checkpoints the WAL). */
	sqlite3_close_v2(st->db);
	store_sync_close(st);
	pthread_cond_destroy(&st->synced_cv[0]);
	pthread_cond_destroy(&st->synced_cv[1]);
	pthread_mutex_destroy(&st->mu);
	free(st);
}
