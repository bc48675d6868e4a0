/*
 * Transactions: store_begin(), store_commit() and store_rollback(), which let
 * a caller make several store calls all or nothing, and the helpers with
 * which one entry point that writes several rows makes them all or nothing,
 * also inside a caller's transaction (as a savepoint of it).
 *
 * A store has one sqlite connection, so a transaction is the connection's:
 * its owner keeps st->mu (recursive) from store_begin() to the end, and every
 * other thread's call waits meanwhile. Runs in rpcd, unprivileged. Fatal here
 * (abort): a pthread mutex call failing; everything else is a STORE_* code
 * with the reason in store_last_error().
 */
#include "store_int.h"

int store_begin(struct store *st)
{
	if (!st) {
		store_set_error("store begin: invalid argument");
		return STORE_ERROR;
	}
	store_lock(st);
	if (st->txn_open) {
		store_set_error("store begin: this thread already has a transaction open");
		store_unlock(st);
		return STORE_ERROR;
	}
	if (store_exec(st, "BEGIN IMMEDIATE", "store begin") != STORE_OK) {
		store_unlock(st);
		return STORE_ERROR;
	}
	st->txn_open = true;
	return STORE_OK; /* st->mu stays held until store_commit() or store_rollback() */
}

/* Ends the open transaction: releases this call's hold on st->mu and store_begin()'s. */
static void store_txn_end(struct store *st)
{
	st->txn_open = false;
	store_unlock(st);
	store_unlock(st);
}

int store_commit(struct store *st)
{
	int rc;

	if (!st) {
		store_set_error("store commit: invalid argument");
		return STORE_ERROR;
	}
	store_lock(st);
	if (!st->txn_open) {
		store_set_error("store commit: no transaction is open");
		store_unlock(st);
		return STORE_ERROR;
	}
	if (store_txn_lost(st, "store commit")) {
		rc = STORE_ERROR;
	} else if ((rc = store_exec(st, "COMMIT", "store commit")) != STORE_OK &&
	           !sqlite3_get_autocommit(st->db)) {
		/* Keep the COMMIT's error text: the rollback's outcome is secondary. */
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	}
	store_txn_end(st);
	return rc;
}

void store_rollback(struct store *st)
{
	if (!st)
		return;
	store_lock(st);
	if (!st->txn_open) {
		store_unlock(st);
		return;
	}
	if (!sqlite3_get_autocommit(st->db))
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	store_txn_end(st);
}

bool store_txn_lost(struct store *st, const char *what)
{
	if (!st->txn_open || !sqlite3_get_autocommit(st->db))
		return false;
	store_set_error("%s: sqlite rolled the open transaction back after an earlier failure: "
	                "nothing of it is kept",
	                what);
	return true;
}

int store_txn_enter(struct store *st, const char *what)
{
	/* A savepoint outside any transaction would begin one of its own. */
	if (store_txn_lost(st, what))
		return STORE_ERROR;
	return store_exec(st, st->txn_open ? "SAVEPOINT store_entry" : "BEGIN IMMEDIATE", what);
}

int store_txn_leave(struct store *st, int rc, const char *what)
{
	if (rc == STORE_OK && (rc = store_exec(st, st->txn_open ? "RELEASE store_entry" : "COMMIT",
	                                       what)) == STORE_OK)
		return STORE_OK;
	/* Keep the first error's text: the rollback's outcome is secondary. */
	if (st->txn_open)
		sqlite3_exec(st->db, "ROLLBACK TO store_entry; RELEASE store_entry", NULL, NULL,
		             NULL);
	else
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}
