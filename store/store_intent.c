/*
 * The store's intents table: one row per operation in progress, written
 * before the helper acts and removed when the operation is done, so that
 * rpcd, starting after a crash, finds every operation that was interrupted
 * and can complete it or undo it. Unique by key ("<op>:<name or id>"); listed
 * in the order they were put (a declared INTEGER PRIMARY KEY, seq).
 *
 * Runs in rpcd, unprivileged. Fatal here (abort): allocation failure and a
 * pthread mutex call failing; everything else is a STORE_* code with the
 * reason in store_last_error(). Statements and locking are in store_sql.c.
 */
#include <stdlib.h>
#include <time.h>

#include "store_int.h"

#define INTENT_COLUMNS "key, op, object_id, detail, created_at"

static void *intent_from_row(sqlite3_stmt *q)
{
	struct store_intent *in = store_xcalloc(1, sizeof *in);

	in->key = store_column_text(q, 0);
	in->op = store_column_text(q, 1);
	in->object_id = store_column_text(q, 2);
	in->detail = store_column_text(q, 3);
	in->created_at = sqlite3_column_int64(q, 4);
	return in;
}

void store_intent_free(struct store_intent *in)
{
	if (!in)
		return;
	free(in->key);
	free(in->op);
	free(in->object_id);
	free(in->detail);
	free(in);
}

static void intent_free_row(void *in)
{
	store_intent_free(in);
}

void store_intent_list_free(struct store_intent **list, size_t n)
{
	store_free_list((void **)list, n, intent_free_row);
}

static int intent_put(struct store *st, const struct store_intent *in, bool sync)
{
	static const char what[] = "intent put";
	struct timespec now;
	sqlite3_stmt *q;
	int rc;

	if (!st || !in || !in->key || !*in->key || !in->op || !*in->op) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	if (clock_gettime(CLOCK_REALTIME, &now) != 0)
		abort(); /* cannot fail with a valid clock and pointer */
	store_lock(st);
	/*
	 * REPLACE removes the row of the same key and inserts a new one, with a
	 * new seq: a replaced intent is listed as the newest.
	 */
	q = store_stmt(st, STMT_INTENT_PUT,
	               "INSERT OR REPLACE INTO intents (" INTENT_COLUMNS
	               ") VALUES (?1, ?2, ?3, ?4, ?5)",
	               what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, in->key)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 2, in->op)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 3, in->object_id)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 4, in->detail)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int64(q, 5, (int64_t)now.tv_sec)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = store_step_write(st, q, what, NULL);
out:
	store_stmt_release(q);
	if (sync)
		store_unlock(st);
	else
		store_unlock_unsynced(st);
	return rc;
}

int store_intent_put(struct store *st, const struct store_intent *in)
{
	return intent_put(st, in, true);
}

int store_intent_put_until_reboot(struct store *st, const struct store_intent *in)
{
	return intent_put(st, in, false);
}

int store_intent_get(struct store *st, const char *key, struct store_intent **out)
{
	return store_get_one(st, STMT_INTENT_GET,
	                     "SELECT " INTENT_COLUMNS " FROM intents WHERE key = ?1", "intent get",
	                     key, NULL, intent_from_row, "no such intent", (void **)out);
}

int store_intent_delete(struct store *st, const char *key)
{
	int rc = store_delete_keyed(st, STMT_INTENT_DELETE, "DELETE FROM intents WHERE key = ?1",
	                            "intent delete", key, NULL, "no such intent");

	/* Forgetting an intent that is already gone is what the caller wanted. */
	return rc == STORE_NOTFOUND ? STORE_OK : rc;
}

int store_intent_list(struct store *st, struct store_intent ***out, size_t *n)
{
	return store_list_all(st, STMT_INTENT_LIST,
	                      "SELECT " INTENT_COLUMNS " FROM intents ORDER BY seq", "intent list",
	                      intent_from_row, intent_free_row, (void ***)out, n);
}
