/*
 * `sepcsictl store`: the rows of sepcsi's sqlite store, for operators and
 * auditors, without the CSI socket. Runs as the operator (root, or whoever
 * may read the state directory).
 *
 * The database is opened with SQLITE_OPEN_READONLY: this process never
 * writes it, never checkpoints its WAL and never migrates its schema, so it
 * is safe next to a running rpcd (which stays the only writer). When no WAL
 * file exists (rpcd is not running, or closed the store cleanly), a read-only
 * connection would still create the -wal and -shm files; the database is then
 * opened "immutable" instead, which creates nothing. That is safe: in WAL mode
 * a writer that starts meanwhile changes the main file only at a checkpoint,
 * never within the moments this read takes. Columns are
 * read from the table itself, so tables and columns added by later schema
 * versions show without a change here; a table this store does not have yet
 * is reported, not an error. Table names come from a fixed list, never from
 * the command line, before they are put into SQL. `check` is the store's own
 * check (store_check() of store/), which opens the file the same read-only way.
 */
#include <errno.h>
#include <inttypes.h>
#include <json.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csic.h"
#include "sctl.h"
#include "store.h"

#define DEFAULT_STATE_DIR  "/var/lib/sepcsi/state"
#define STORE_FILE         "sepcsi.db"
#define SEPCSI_APP_ID      0x73657063 /* "sepc", as store/store.c sets it */
#define BUSY_TIMEOUT_MS    5000
#define MAX_COLS           64
#define DISPLAY_VALUE_SIZE 512

static const char *const tables[] = {"volumes",      "snapshots",   "group_snapshots", "stagings",
                                     "publications", "attachments", "intents"};
#define NTABLES (sizeof(tables) / sizeof(tables[0]))

static void store_help(FILE *o)
{
	fprintf(o,
	        "usage: sepcsictl store <view> [--state-dir DIR] [--output text|json]\n\n"
	        "Rows of sepcsi's store <state-dir>/sepcsi.db, opened read-only (safe while "
	        "the\ndriver runs). No CSI socket needed.\n\nviews:\n"
	        "  volumes          volumes the CO created\n"
	        "  snapshots        snapshots (members of group snapshots included)\n"
	        "  group-snapshots  group snapshots\n"
	        "  stagings         NodeStageVolume records\n"
	        "  publications     NodePublishVolume records\n"
	        "  attachments      ControllerPublishVolume records\n"
	        "  intents          operations in progress (written before the helper acts)\n"
	        "  info             the store's path, schema version and row counts\n"
	        "  check            sqlite's integrity check, and what rpcd checks at start:\n"
	        "                   prints ok (exit 0) or the problem (exit 1)\n\n"
	        "flags:\n  --state-dir DIR   rpcd's --state-dir (default %s)\n"
	        "A view whose table this store's schema does not have yet prints nothing and "
	        "says so on stderr.\n",
	        DEFAULT_STATE_DIR);
}

static bool table_exists(sqlite3 *db, const char *name)
{
	sqlite3_stmt *q = NULL;
	bool yes = false;

	if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
	                       -1, &q, NULL) != SQLITE_OK)
		return false;
	sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
	yes = sqlite3_step(q) == SQLITE_ROW;
	sqlite3_finalize(q);
	return yes;
}

static int64_t pragma_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *q = NULL;
	int64_t v = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
		v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return v;
}

static const char *access_type_name(int64_t v)
{
	return v == 1 ? "block" : v == 2 ? "mount" : "?";
}

static const char *access_mode_name(int64_t v)
{
	static const char *const names[] = {
	    "unknown",
	    "single-node-writer",
	    "single-node-reader-only",
	    "multi-node-reader-only",
	    "multi-node-single-writer",
	    "multi-node-multi-writer",
	    "single-node-single-writer",
	    "single-node-multi-writer",
	};
	return v >= 0 && v < 8 ? names[v] : "?";
}

/*
 * A column value for the text table: sizes and times made readable, codes
 * named, "k=v\n" lists joined with commas, NULL and "" shown as "-".
 */
static void display(sqlite3_stmt *q, int col, char *buf, size_t len)
{
	const char *name = sqlite3_column_name(q, col);
	int type = sqlite3_column_type(q, col);
	size_t n = strlen(name);

	if (type == SQLITE_NULL) {
		snprintf(buf, len, "-");
		return;
	}
	if (type == SQLITE_INTEGER) {
		int64_t v = sqlite3_column_int64(q, col);
		if (n > 6 && strcmp(name + n - 6, "_bytes") == 0) {
			units_format_size(v, buf, len);
		} else if (n > 8 && strcmp(name + n - 8, "_unix_ns") == 0) {
			sctl_format_time(v / 1000000000, 0, buf, len);
		} else if (strcmp(name, "created_at") == 0) { /* unix seconds */
			sctl_format_time(v, 0, buf, len);
		} else if (strcmp(name, "access_type") == 0) {
			snprintf(buf, len, "%s", access_type_name(v));
		} else if (strcmp(name, "access_mode") == 0) {
			snprintf(buf, len, "%s", access_mode_name(v));
		} else if (strcmp(name, "readonly") == 0 || strncmp(name, "ready", 5) == 0) {
			snprintf(buf, len, "%s", v ? "true" : "false");
		} else {
			snprintf(buf, len, "%" PRId64, v);
		}
		return;
	}
	if (type == SQLITE_BLOB) {
		const unsigned char *b = sqlite3_column_blob(q, col);
		int nb = sqlite3_column_bytes(q, col);
		size_t o = 0;
		for (int i = 0; i < nb && o + 3 < len; i++, o += 2)
			snprintf(buf + o, len - o, "%02x", b[i]);
		buf[o] = '\0';
		return;
	}
	const char *s = (const char *)sqlite3_column_text(q, col);
	size_t o = 0;
	for (; s && *s && o + 1 < len; s++) {
		if (*s == '\n') {
			if (s[1] != '\0')
				buf[o++] = ',';
		} else {
			buf[o++] = (char)((unsigned char)*s < 0x20 ? '?' : *s);
		}
	}
	buf[o] = '\0';
	if (o == 0)
		snprintf(buf, len, "-");
}

/* A column's raw value: integers as numbers, text as strings, blobs as hex. */
static json_object *json_value(sqlite3_stmt *q, int col)
{
	switch (sqlite3_column_type(q, col)) {
	case SQLITE_NULL:
		return NULL;
	case SQLITE_INTEGER:
		return json_object_new_int64(sqlite3_column_int64(q, col));
	case SQLITE_FLOAT:
		return json_object_new_double(sqlite3_column_double(q, col));
	case SQLITE_BLOB:
		return sctl_json_hex(sqlite3_column_blob(q, col),
		                     (size_t)sqlite3_column_bytes(q, col));
	default:
		return json_object_new_string((const char *)sqlite3_column_text(q, col));
	}
}

/* Text rows are collected first so that the columns line up. */
struct grid {
	char **cells; /* rows x cols, row 0 the header */
	size_t rows, cols;
};

static void grid_add(struct grid *g, size_t row, size_t col, const char *s)
{
	if (row >= g->rows) {
		g->cells = realloc(g->cells, (row + 1) * g->cols * sizeof(char *));
		if (!g->cells)
			abort();
		g->rows = row + 1;
	}
	g->cells[row * g->cols + col] = strdup(s);
	if (!g->cells[row * g->cols + col])
		abort();
}

static void grid_print_free(struct grid *g)
{
	size_t width[MAX_COLS] = {0};

	for (size_t r = 0; r < g->rows; r++)
		for (size_t c = 0; c < g->cols; c++)
			if (strlen(g->cells[r * g->cols + c]) > width[c])
				width[c] = strlen(g->cells[r * g->cols + c]);
	for (size_t r = 0; r < g->rows; r++) {
		for (size_t c = 0; c < g->cols; c++) {
			const char *s = g->cells[r * g->cols + c];
			if (c + 1 == g->cols)
				printf("%s\n", s);
			else
				printf("%-*s  ", (int)width[c], s);
			free(g->cells[r * g->cols + c]);
		}
	}
	free(g->cells);
}

/* {"<table>": rows} on one line; takes rows. */
static void print_rows(const char *table, json_object *rows)
{
	json_object *j = json_object_new_object();

	json_object_object_add(j, table, rows);
	sctl_json_print(stdout, j);
	putchar('\n');
}

static int print_table(sqlite3 *db, const char *table, enum sctl_output out)
{
	char sql[128];
	sqlite3_stmt *q = NULL;

	/* table is one of the fixed names above, never input. */
	snprintf(sql, sizeof(sql), "SELECT * FROM \"%s\" ORDER BY 1", table);
	if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) {
		fprintf(stderr, "sepcsictl: store: reading %s: %s\n", table, sqlite3_errmsg(db));
		return SCTL_EXIT_FAILURE;
	}
	int ncols = sqlite3_column_count(q);
	if (ncols > MAX_COLS)
		ncols = MAX_COLS;
	struct grid g = {.cols = (size_t)ncols};
	json_object *rows = out == SCTL_OUT_JSON ? json_object_new_array() : NULL;
	size_t row = 0;
	int rc;

	for (int c = 0; c < ncols && out == SCTL_OUT_TEXT; c++)
		grid_add(&g, 0, (size_t)c, sqlite3_column_name(q, c));
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		row++;
		if (out == SCTL_OUT_JSON) {
			json_object *r = json_object_new_object();
			for (int c = 0; c < ncols; c++)
				json_object_object_add(r, sqlite3_column_name(q, c),
				                       json_value(q, c));
			json_object_array_add(rows, r);
			continue;
		}
		for (int c = 0; c < ncols; c++) {
			char buf[DISPLAY_VALUE_SIZE];
			display(q, c, buf, sizeof(buf));
			grid_add(&g, row, (size_t)c, buf);
		}
	}
	if (out == SCTL_OUT_JSON)
		print_rows(table, rows);
	else
		grid_print_free(&g);
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "sepcsictl: store: reading %s: %s\n", table, sqlite3_errmsg(db));
		sqlite3_finalize(q);
		return SCTL_EXIT_FAILURE;
	}
	if (out == SCTL_OUT_TEXT && row == 0)
		printf("(no %s)\n", table);
	sqlite3_finalize(q);
	return SCTL_EXIT_OK;
}

static int print_info(sqlite3 *db, const char *path, enum sctl_output out)
{
	int64_t version = pragma_int(db, "PRAGMA user_version");
	int64_t app = pragma_int(db, "PRAGMA application_id");
	json_object *counts = json_object_new_object(); /* table: rows, or null when absent */

	for (size_t i = 0; i < NTABLES; i++) {
		int64_t n = -1;
		if (table_exists(db, tables[i])) {
			char sql[96];
			snprintf(sql, sizeof(sql), "SELECT count(*) FROM \"%s\"", tables[i]);
			n = pragma_int(db, sql);
		}
		json_object_object_add(counts, tables[i], n < 0 ? NULL : json_object_new_int64(n));
	}
	if (out == SCTL_OUT_JSON) {
		json_object *j = json_object_new_object();
		json_object_object_add(j, "path", json_object_new_string(path));
		json_object_object_add(j, "schema_version", json_object_new_int64(version));
		json_object_object_add(j, "sepcsi_store",
		                       json_object_new_boolean(app == SEPCSI_APP_ID));
		json_object_object_add(j, "tables", counts);
		sctl_json_print(stdout, j);
		putchar('\n');
		return SCTL_EXIT_OK;
	}
	printf("path: %s\nschema_version: %" PRId64 "\nsepcsi_store: %s\ntables:\n", path, version,
	       app == SEPCSI_APP_ID ? "true" : "false");
	json_object_object_foreach(counts, table, n)
	{
		if (n)
			printf("  %s: %" PRId64 "\n", table, json_object_get_int64(n));
		else
			printf("  %s: (not in this schema)\n", table);
	}
	json_object_put(counts);
	return SCTL_EXIT_OK;
}

/*
 * `store check`: the store's own check (store_check(), read-only). "ok" on
 * stdout and exit 0, or the problem on stderr and exit 1; with --output json
 * one object on stdout either way.
 */
static int print_check(const char *path, enum sctl_output out)
{
	char msg[1024];
	int rc = store_check(path, msg, sizeof(msg));

	if (rc == STORE_NOTFOUND) {
		fprintf(stderr, "sepcsictl: store: no store at %s (is --state-dir right?)\n", path);
		return SCTL_EXIT_ABSENT;
	}
	if (out == SCTL_OUT_JSON) {
		json_object *j = json_object_new_object();
		json_object_object_add(j, "path", json_object_new_string(path));
		json_object_object_add(j, "ok", json_object_new_boolean(rc == STORE_OK));
		json_object_object_add(j, "result", json_object_new_string(msg));
		sctl_json_print(stdout, j);
		putchar('\n');
	} else if (rc == STORE_OK) {
		printf("ok\n");
	} else {
		fprintf(stderr, "sepcsictl: %s\n", msg);
	}
	return rc == STORE_OK ? SCTL_EXIT_OK : SCTL_EXIT_FAILURE;
}

/* A sqlite URI for path, percent-encoding what a URI path may not hold. */
static void db_uri(const char *path, bool immutable, char *out, size_t len)
{
	size_t o = (size_t)snprintf(out, len, "file:");

	for (const unsigned char *p = (const unsigned char *)path; *p && o + 4 < len; p++) {
		if (*p == '%' || *p == '?' || *p == '#' || *p < 0x21 || *p > 0x7e)
			o += (size_t)snprintf(out + o, len - o, "%%%02X", *p);
		else
			out[o++] = (char)*p;
	}
	out[o] = '\0';
	if (immutable)
		snprintf(out + o, len - o, "?immutable=1");
}

int sctl_store_main(int argc, char **argv, struct sctl_opts *o)
{
	enum { OPT_STATE_DIR = SCTL_OPT_OWN };
	static const struct option longopts[] = {
	    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
	    SCTL_COMMON_OPTIONS,
	};
	const char *state_dir = DEFAULT_STATE_DIR, *view = NULL;
	int c;

	optind = 0;
	while ((c = sctl_getopt(argc, argv, "-:o:h", longopts, "store: ", o, &view)) != -1) {
		if (c == OPT_STATE_DIR) {
			state_dir = optarg;
		} else if (c == SCTL_OPT_HELP) {
			store_help(stdout);
			return SCTL_EXIT_OK;
		} else {
			return SCTL_EXIT_USAGE;
		}
	}
	if (!view) {
		store_help(stderr);
		return SCTL_EXIT_USAGE;
	}
	const char *table = NULL;
	for (size_t i = 0; i < NTABLES; i++) {
		/* "group-snapshots" and "group_snapshots" name the same view. */
		size_t n = strlen(tables[i]);
		bool same = strlen(view) == n;
		for (size_t j = 0; same && j < n; j++)
			same = view[j] == tables[i][j] || (view[j] == '-' && tables[i][j] == '_');
		if (same)
			table = tables[i];
	}
	if (!table && strcmp(view, "info") != 0 && strcmp(view, "check") != 0) {
		fprintf(stderr, "sepcsictl: store: unknown view '%s' (see --help)\n", view);
		return SCTL_EXIT_USAGE;
	}

	char path[4096];
	struct stat sb;
	if (snprintf(path, sizeof(path), "%s/%s", state_dir, STORE_FILE) >= (int)sizeof(path)) {
		fprintf(stderr, "sepcsictl: store: --state-dir is too long\n");
		return SCTL_EXIT_USAGE;
	}
	if (stat(path, &sb) != 0) {
		fprintf(stderr, "sepcsictl: store: no store at %s: %s (is --state-dir right?)\n",
		        path, strerror(errno));
		return errno == ENOENT ? SCTL_EXIT_ABSENT : SCTL_EXIT_FAILURE;
	}
	if (strcmp(view, "check") == 0)
		return print_check(path, o->output);
	sqlite3 *db = NULL;
	char uri[3 * sizeof(path) + 32];
	char wal[sizeof(path) + 8];
	snprintf(wal, sizeof(wal), "%s-wal", path);
	db_uri(path, access(wal, F_OK) != 0, uri, sizeof(uri));
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) != SQLITE_OK) {
		fprintf(stderr, "sepcsictl: store: cannot open %s: %s\n", path,
		        db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return SCTL_EXIT_FAILURE;
	}
	sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
	int64_t app = pragma_int(db, "PRAGMA application_id");
	int rc;
	if (app < 0) {
		fprintf(stderr, "sepcsictl: store: cannot read %s: %s\n", path, sqlite3_errmsg(db));
		rc = SCTL_EXIT_FAILURE;
	} else if (app != SEPCSI_APP_ID) {
		fprintf(stderr, "sepcsictl: store: %s is not a sepcsi store\n", path);
		rc = SCTL_EXIT_FAILURE;
	} else if (!table) {
		rc = print_info(db, path, o->output);
	} else if (!table_exists(db, table)) {
		fprintf(stderr,
		        "sepcsictl: store: this store (schema version %" PRId64
		        ") has no %s table: nothing recorded\n",
		        pragma_int(db, "PRAGMA user_version"), table);
		if (o->output == SCTL_OUT_JSON)
			print_rows(table, json_object_new_array());
		rc = SCTL_EXIT_OK;
	} else {
		rc = print_table(db, table, o->output);
	}
	sqlite3_close(db);
	return rc;
}
