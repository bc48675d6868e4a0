/*
 * Counts of what the store holds, grouped, for the metrics rpcd reports
 * (rpcd/rpcd_metrics.c): volumes by state and kind, snapshots, group
 * snapshots, controller attachments and operations in progress.
 *
 * Runs in rpcd, unprivileged. Read-only; nothing here is fatal. The queries
 * are prepared for each call (a tally runs once per metrics interval, not
 * per CSI call), under the store's lock like every other entry point.
 */
#include "store_int.h"

/*
 * One row per (table, first label, second label): the SQL returns exactly
 * those four columns, count and byte total. A volume's state is the furthest
 * it has come on this node: published, else staged, else created.
 */
static const struct {
	const char *table;
	const char *sql;
} tallies[] = {
    {"volumes",
     "SELECT CASE WHEN EXISTS (SELECT 1 FROM publications p WHERE p.volume_id = v.id)"
     " THEN 'published' WHEN EXISTS (SELECT 1 FROM stagings s WHERE s.volume_id = v.id)"
     " THEN 'staged' ELSE 'created' END,"
     " CASE WHEN v.kind = 'directory' THEN 'directory' WHEN v.fs_type = '' THEN 'block'"
     " ELSE v.fs_type END, count(*), total(v.capacity_bytes) FROM volumes v GROUP BY 1, 2"},
    {"snapshots", "SELECT CASE WHEN group_id = '' THEN 'single' ELSE 'group_member' END, '',"
                  " count(*), total(size_bytes) FROM snapshots GROUP BY 1"},
    {"group_snapshots", "SELECT '', '', count(*), 0 FROM group_snapshots"},
    {"attachments", "SELECT CASE readonly WHEN 0 THEN 'read_write' ELSE 'read_only' END, '',"
                    " count(*), 0 FROM attachments GROUP BY 1"},
    {"intents", "SELECT op, '', count(*), 0 FROM intents GROUP BY 1"},
};

static int tally_one(struct store *st, size_t i, store_tally_fn *fn, void *arg)
{
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(st->db, tallies[i].sql, -1, &q, NULL);

	while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		const unsigned char *a = sqlite3_column_text(q, 0);
		const unsigned char *b = sqlite3_column_text(q, 1);
		fn(arg, tallies[i].table, a ? (const char *)a : "", b ? (const char *)b : "",
		   sqlite3_column_int64(q, 2), (uint64_t)sqlite3_column_double(q, 3));
		rc = SQLITE_OK;
	}
	if (rc != SQLITE_DONE)
		rc = store_fail(st, rc, tallies[i].table);
	else
		rc = STORE_OK;
	sqlite3_finalize(q);
	return rc;
}

int store_tally(struct store *st, store_tally_fn *fn, void *arg)
{
	int rc = STORE_OK;

	if (!st || !fn) {
		store_set_error("tally: invalid argument");
		return STORE_ERROR;
	}
	store_lock(st);
	for (size_t i = 0; i < sizeof(tallies) / sizeof(tallies[0]) && rc == STORE_OK; i++)
		rc = tally_one(st, i, fn, arg);
	store_unlock(st);
	return rc;
}
