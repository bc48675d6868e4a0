/*
 * The store: opening the sqlite database, checking what is found there, the
 * schema migrations, and closing it. The tables are in store_volume.c,
 * store_node.c and store_ctl.c; the helpers they share in store_sql.c.
 *
 * Runs in rpcd, unprivileged; rpcd is the only writer of this file. One sqlite
 * connection per store, serialised by a pthread mutex, in WAL mode with
 * synchronous=FULL (a committed row survives power loss) and foreign keys on
 * (a volume cannot be deleted while a staging or publication names it).
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
};

#define STORE_SCHEMA_VERSION ((int64_t)(sizeof store_migrations / sizeof store_migrations[0]))

/* ---- open and migrate ---- */

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
 * Refuses, before anything is written, a file that is not a sqlite database,
 * a sqlite database that is not a sepcsi store, and a store whose schema is
 * newer than this code knows. *version gets the schema version found.
 */
static int store_check_identity(struct store *st, const char *path, int64_t *version)
{
	int64_t app_id = 0, objects = 0;
	int rc;

	rc = store_query_int(st, "PRAGMA user_version", version, "store open");
	if (rc != SQLITE_OK) {
		if ((rc & 0xff) == SQLITE_NOTADB)
			store_set_error("store open %s: not a sqlite database (%s)", path,
			                sqlite3_errmsg(st->db));
		return STORE_ERROR;
	}
	if (store_query_int(st, "PRAGMA application_id", &app_id, "store open") != SQLITE_OK ||
	    store_query_int(st, "SELECT count(*) FROM sqlite_master", &objects, "store open") !=
	        SQLITE_OK)
		return STORE_ERROR;
	if (*version == 0 ? (app_id != 0 || objects != 0) : app_id != STORE_APPLICATION_ID) {
		store_set_error("store open %s: a sqlite database but not a sepcsi store "
		                "(application_id %" PRId64 ", user_version %" PRId64 ")",
		                path, app_id, *version);
		return STORE_ERROR;
	}
	if (*version > STORE_SCHEMA_VERSION) {
		store_set_error("store open %s: schema version %" PRId64
		                " is newer than this build knows (%" PRId64 ")",
		                path, *version, STORE_SCHEMA_VERSION);
		return STORE_ERROR;
	}
	return STORE_OK;
}

/* WAL, synchronous=FULL, foreign keys: each read back, since each is part of the contract. */
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

	if (store_exec(st, "PRAGMA synchronous = FULL", "store open: synchronous") != STORE_OK ||
	    store_exec(st, "PRAGMA foreign_keys = ON", "store open: foreign_keys") != STORE_OK)
		return STORE_ERROR;
	if (store_query_int(st, "PRAGMA synchronous", &v, "store open") != SQLITE_OK)
		return STORE_ERROR;
	if (v != 2) {
		store_set_error("store open %s: synchronous is %" PRId64 ", not FULL", path, v);
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
	if (store_create_file(path) != STORE_OK)
		return STORE_ERROR;

	st = store_xcalloc(1, sizeof *st);
	if (pthread_mutex_init(&st->mu, NULL) != 0)
		abort();
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

	if (store_check_identity(st, path, &version) != STORE_OK ||
	    store_configure(st, path) != STORE_OK)
		goto fail;
	if (version < STORE_SCHEMA_VERSION && store_migrate(st, path) != STORE_OK)
		goto fail;
	*out = st;
	return STORE_OK;
fail:
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
	pthread_mutex_destroy(&st->mu);
	free(st);
}
