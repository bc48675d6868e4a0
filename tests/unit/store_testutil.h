/*
 * What the store's unit tests share: a scratch directory, opening a store that
 * must open, and reading or writing the database file behind the store's back
 * (with a direct sqlite connection, or as plain bytes). Include after tap.h's
 * system headers; each test binary is one process with one scratch directory.
 */
#ifndef SEPCSI_TEST_STORE_TESTUTIL_H
#define SEPCSI_TEST_STORE_TESTUTIL_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "tap.h"

/* The schema version this build's store_open() migrates to. */
#define STORE_TEST_SCHEMA 6

/* SQL that takes the step to schema 5 (directory volumes) away again, for migration tests. */
/* Schema 6 back to 5: volumes on a shared base. */
#define STORE_TEST_UNDO_V6 "ALTER TABLE volumes DROP COLUMN shared;"
#define STORE_TEST_UNDO_V5                                                                         \
	STORE_TEST_UNDO_V6                                                                         \
	"DROP INDEX volumes_by_directory;"                                                         \
	"ALTER TABLE volumes DROP COLUMN kind;"                                                    \
	"ALTER TABLE volumes DROP COLUMN dir_base;"                                                \
	"ALTER TABLE volumes DROP COLUMN dir_name;"                                                \
	"ALTER TABLE volumes DROP COLUMN on_delete;"                                               \
	"ALTER TABLE volumes DROP COLUMN quota;"                                                   \
	"ALTER TABLE snapshots DROP COLUMN kind;"                                                  \
	"ALTER TABLE snapshots DROP COLUMN dir_base;"

static char tmpdir[] = "/tmp/sepcsi-test-store-XXXXXX";

/* path of a file in the test directory, in the caller's buffer */
static inline const char *tpath(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
	return buf;
}

/* Opens the store at path, or ends the test binary: nothing after it could run. */
static inline struct store *open_ok(const char *path)
{
	struct store *st = NULL;
	int rc = store_open(path, &st);

	if (rc != STORE_OK)
		fprintf(stderr, "store_open %s: %d %s\n", path, rc, store_last_error());
	CHECK(rc == STORE_OK && st != NULL);
	if (!st)
		exit(tap_done(program_invocation_short_name));
	return st;
}

/* Puts a volume with the given id and name and fixed other fields. */
static inline int put_vol(struct store *st, const char *id, const char *name)
{
	struct store_volume v = {
	    .id = (char *)id,
	    .name = (char *)name,
	    .capacity_bytes = INT64_C(1) << 30,
	    .fs_type = (char *)"ext4",
	    .parameters = (char *)"a=1\nb=2\n",
	    .content_source = (char *)"",
	    .created_unix_ns = INT64_C(1700000000123456789),
	};
	return store_volume_put(st, &v);
}

/* Reads one integer with a direct sqlite connection (the store must be closed or idle). */
static inline int64_t sql_int(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	int64_t v = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
		v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return v;
}

static inline int sql_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_close(db);
	return rc;
}

static inline int write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ssize_t w;

	if (fd < 0)
		return -1;
	w = write(fd, buf, len);
	close(fd);
	return w == (ssize_t)len ? 0 : -1;
}

/* The whole file, newly allocated (*len bytes); NULL if it cannot be read. */
static inline char *read_all(const char *path, size_t *len)
{
	struct stat sb;
	char *buf = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*len = 0;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &sb) == 0 && (buf = malloc((size_t)sb.st_size + 1)) != NULL &&
	    read(fd, buf, (size_t)sb.st_size) == (ssize_t)sb.st_size) {
		*len = (size_t)sb.st_size;
	} else {
		free(buf);
		buf = NULL;
	}
	close(fd);
	return buf;
}

static inline int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Makes tmpdir, or ends the test binary. */
static inline void scratch_begin(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		exit(EXIT_FAILURE);
	}
}

/* Removes tmpdir and everything in it; returns the test binary's exit status. */
static inline int scratch_end(const char *name)
{
	CHECK(nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0);
	return tap_done(name);
}

#endif
