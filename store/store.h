/*
 * The sqlite store: what the CO asked for (volumes, stagings, publications,
 * snapshots, group snapshots, controller attachments) and the operations in
 * progress (intents).
 * Runs in rpcd, unprivileged; rpcd is its only writer. The kernel is the truth
 * for mounts and loop devices; this is the truth for intent.
 *
 * Every function returns a STORE_* code. Strings handed in are copied; strings
 * handed out belong to the returned struct and are freed with its _free
 * function (which accepts NULL). Thread-safe: one connection, serialised by a
 * mutex inside (sqlite in WAL mode). Durable: when a call that wrote returns,
 * what it wrote survives power loss, and no call returns what a power loss
 * could still take away (store_sync.c: one fdatasync of the WAL serves every
 * commit made while the one before it ran).
 */
#ifndef SEPCSI_STORE_H
#define SEPCSI_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum store_rc {
	STORE_OK = 0,
	STORE_NOTFOUND = 1,
	STORE_EXISTS = 2, /* unique key (id, name, or volume+path) already present */
	STORE_ERROR = 3,  /* sqlite failure; see store_last_error() */
};

struct store;

struct store_volume {
	char *id;
	char *name;
	int64_t capacity_bytes;
	char *fs_type;        /* "ext4", ... or "" for block-only volumes */
	char *parameters;     /* canonical "k=v\n" lines, sorted by key, as given to CreateVolume */
	char *content_source; /* "" or "snapshot:<id>" / "volume:<id>" */
	int64_t created_unix_ns;
	/*
	 * Since schema 2. A NULL string is stored as "" (so code that predates
	 * these fields keeps working).
	 */
	char *mkfs_options;       /* the "mkfsOptions" parameter, space-separated; for STAGE */
	bool nouuid;              /* an xfs copy of another image: mount with "nouuid" */
	char *mutable_parameters; /* canonical "k=v\n" lines, as CreateVolume/Modify left them */
	char *condition;          /* "" when healthy, else why the volume is abnormal */
	/*
	 * Since schema 5. kind is STORE_KIND_IMAGE (NULL or "" is stored as
	 * that) or STORE_KIND_DIRECTORY; the rest is "" / false for images.
	 */
	char *kind;
	char *dir_base;  /* a directory volume's base directory */
	char *dir_name;  /* its directory beneath dir_base; unique per base among volumes */
	char *on_delete; /* "delete", "retain" or "archive" */
	bool quota;      /* a project quota enforces capacity_bytes (else it is advisory) */
	int shared;      /* since schema 6: STORE_SHARED_* */
};

/* store_volume.shared: where a directory volume's base is, and who made it. */
#define STORE_SHARED_NO      0 /* a node-local volume */
#define STORE_SHARED_MADE    1 /* on a base every node shares, made by this Controller service */
#define STORE_SHARED_ADOPTED 2 /* on a shared base, made elsewhere, staged or published here */

#define STORE_KIND_IMAGE     "image"
#define STORE_KIND_DIRECTORY "directory"

struct store_staging {
	char *volume_id;
	char *staging_path;
	char *fs_type;
	char *mount_flags;   /* comma-separated, canonical order */
	int access_type;     /* 1 = block, 2 = mount (csi.proto numbering of the oneof) */
	int access_mode;     /* csi AccessMode.Mode */
	int64_t mount_group; /* since schema 4: the gid of volume_mount_group, 0 for none */
};

struct store_publication {
	char *volume_id;
	char *target_path;
	char *staging_path;
	bool readonly;
	int access_type;
	int access_mode;
	char *mount_flags;
};

/*
 * Opens the database at path, creating it if the file does not exist (an
 * empty file counts as new), checks it and migrates the schema. A file that
 * is not a sqlite database, a sqlite database that is not a sepcsi store, a
 * store of a newer schema, and a store that fails sqlite's integrity check are
 * STORE_ERROR with "store open <path>: <what is wrong>" in store_last_error();
 * such a file is left exactly as it was found (its WAL is not checkpointed
 * either), never recreated or overwritten.
 */
int store_open(const char *path, struct store **out);
void store_close(struct store *st);
/* Last sqlite error message of this thread's most recent failing call (static storage). */
const char *store_last_error(void);

/*
 * Checks the store at path without writing anything: opens it read-only
 * (safe next to a running rpcd, and creating no file beside it) and makes
 * the checks store_open() makes (what the file is, sqlite's integrity
 * check). STORE_OK with "ok" in msg; STORE_NOTFOUND when path does not exist;
 * STORE_ERROR with the problem in msg (and in store_last_error()). msg gets at
 * most cap bytes, NUL-terminated; it may be NULL when cap is 0.
 */
int store_check(const char *path, char *msg, size_t cap);

/*
 * Transactions. store_begin() opens a write transaction for the calling
 * thread: every store call that thread makes until store_commit() or
 * store_rollback() is part of it, all kept or none, and every other thread's
 * store call waits until it ends. So keep it short: in between, call store
 * functions only (never the helper, never a lock another thread may hold
 * while it calls the store). No nesting: store_begin() while this thread has
 * a transaction open is STORE_ERROR (functions that write several rows,
 * such as store_group_snapshot_put(), do nest inside one). store_commit()
 * ends the transaction whatever happens: on failure nothing of it was kept;
 * without an open transaction it is STORE_ERROR. store_rollback() forgets
 * everything since store_begin(); without an open transaction it does
 * nothing. A call inside a transaction that fails leaves the transaction
 * open (the failed statement itself changed nothing), except when sqlite had
 * to roll it back (a full disk, an I/O error): then every later call fails
 * until store_rollback().
 */
int store_begin(struct store *st);
int store_commit(struct store *st);
void store_rollback(struct store *st);

/* EXISTS on id, name, or (directory volumes) the same base and dir_name. */
int store_volume_put(struct store *st, const struct store_volume *v);
int store_volume_get(struct store *st, const char *id, struct store_volume **out);
int store_volume_get_by_name(struct store *st, const char *name, struct store_volume **out);
/* The directory volume whose directory is name beneath base; NOTFOUND if none. */
int store_volume_get_by_directory(struct store *st, const char *base, const char *name,
                                  struct store_volume **out);
int store_volume_delete(struct store *st, const char *id); /* NOTFOUND if absent */
/*
 * Page through volumes ordered by id, strictly after after_id ("" = from the
 * start), at most limit (0 = no limit). *out is an array of *n pointers;
 * free with store_volume_list_free().
 */
int store_volume_list(struct store *st, const char *after_id, size_t limit,
                      struct store_volume ***out, size_t *n);
void store_volume_list_free(struct store_volume **list, size_t n);
int store_volume_count(struct store *st, size_t *n);
void store_volume_free(struct store_volume *v);
/*
 * Rewrites the columns that change during a volume's life (capacity_bytes,
 * mutable_parameters, condition) of the volume v->id; NOTFOUND if absent.
 */
int store_volume_update(struct store *st, const struct store_volume *v);

/* One staging per volume. put replaces nothing: EXISTS if the volume is already staged. */
int store_staging_put(struct store *st, const struct store_staging *s);
int store_staging_get(struct store *st, const char *volume_id, struct store_staging **out);
int store_staging_delete(struct store *st, const char *volume_id);
/* Every staging, by volume id (reconciliation). Free with store_staging_list_free(). */
int store_staging_list(struct store *st, struct store_staging ***out, size_t *n);
void store_staging_list_free(struct store_staging **list, size_t n);
void store_staging_free(struct store_staging *s);

/* Publications are keyed by (volume_id, target_path). */
int store_publication_put(struct store *st, const struct store_publication *p);
int store_publication_get(struct store *st, const char *volume_id, const char *target_path,
                          struct store_publication **out);
int store_publication_delete(struct store *st, const char *volume_id, const char *target_path);
int store_publication_count(struct store *st, const char *volume_id, size_t *n);
/*
 * The volume's read-write publications: how many (*n), and how many of them
 * were made with access mode `mode` (*of_mode). For the single-writer rule.
 */
int store_publication_writers(struct store *st, const char *volume_id, int mode, size_t *n,
                              size_t *of_mode);
/* Every publication, by volume id and target (reconciliation). */
int store_publication_list(struct store *st, struct store_publication ***out, size_t *n);
void store_publication_list_free(struct store_publication **list, size_t n);
void store_publication_free(struct store_publication *p);

/*
 * Snapshots (since schema 2). A snapshot names its source volume but does not
 * reference it: snapshots outlive their source. Members of a group snapshot
 * have name "" (stored as NULL, so never a duplicate) and group_id set.
 */
struct store_snapshot {
	char *id;
	char *name;
	char *source_volume_id;
	int64_t size_bytes;
	char *fs_type;    /* of the source volume: "" for raw block */
	char *parameters; /* canonical "k=v\n" lines, as given to CreateSnapshot */
	char *group_id;   /* "" unless a member of a group snapshot */
	int64_t created_unix_ns;
	/* Since schema 5: STORE_KIND_* of the source (NULL or "" = image), and its base. */
	char *kind;
	char *dir_base; /* a directory volume's snapshot: the base it lives in */
};

int store_snapshot_put(struct store *st, const struct store_snapshot *s); /* EXISTS: id/name */
int store_snapshot_get(struct store *st, const char *id, struct store_snapshot **out);
int store_snapshot_get_by_name(struct store *st, const char *name, struct store_snapshot **out);
int store_snapshot_delete(struct store *st, const char *id); /* NOTFOUND if absent */
/*
 * Page through snapshots ordered by id, strictly after after_id ("" = from the
 * start), at most limit (0 = no limit); only those of source_volume_id unless
 * it is NULL or "". Free with store_snapshot_list_free().
 */
int store_snapshot_list(struct store *st, const char *source_volume_id, const char *after_id,
                        size_t limit, struct store_snapshot ***out, size_t *n);
/* The members of a group snapshot, ordered by id. */
int store_snapshot_list_group(struct store *st, const char *group_id, struct store_snapshot ***out,
                              size_t *n);
void store_snapshot_list_free(struct store_snapshot **list, size_t n);
void store_snapshot_free(struct store_snapshot *s);

/* Group snapshots (since schema 2). */
struct store_group_snapshot {
	char *id;
	char *name;
	char *source_volume_ids; /* sorted, each followed by '\n' */
	char *parameters;        /* canonical "k=v\n" lines */
	int64_t created_unix_ns;
};

/* Records the group and its member snapshots in one transaction: all or nothing. */
int store_group_snapshot_put(struct store *st, const struct store_group_snapshot *g,
                             const struct store_snapshot *members, size_t n);
int store_group_snapshot_get(struct store *st, const char *id, struct store_group_snapshot **out);
int store_group_snapshot_get_by_name(struct store *st, const char *name,
                                     struct store_group_snapshot **out);
/* Forgets the group and its member snapshots in one transaction; NOTFOUND if absent. */
int store_group_snapshot_delete(struct store *st, const char *id);
void store_group_snapshot_free(struct store_group_snapshot *g);

/*
 * Controller attachments (ControllerPublishVolume), keyed by (volume_id,
 * node_id); since schema 2. They reference the volume, which cannot be
 * deleted while attached.
 */
struct store_attachment {
	char *volume_id;
	char *node_id;
	bool readonly;
	int access_type; /* 1 = block, 2 = mount */
	int access_mode; /* csi AccessMode.Mode */
};

int store_attachment_put(struct store *st, const struct store_attachment *a); /* EXISTS */
int store_attachment_get(struct store *st, const char *volume_id, const char *node_id,
                         struct store_attachment **out);
/* node_id NULL: every attachment of the volume. NOTFOUND if nothing was deleted. */
int store_attachment_delete(struct store *st, const char *volume_id, const char *node_id);
/* The attachments of one volume, ordered by node id. */
int store_attachment_list(struct store *st, const char *volume_id, struct store_attachment ***out,
                          size_t *n);
void store_attachment_list_free(struct store_attachment **list, size_t n);
int store_attachment_count_node(struct store *st, const char *node_id, size_t *n);
void store_attachment_free(struct store_attachment *a);

/*
 * Intents (since schema 3): an operation in progress, written before the
 * helper acts and removed when it is done, so that a start after a crash
 * finds what was interrupted. To record an operation's result and forget its
 * intent atomically, do both between store_begin() and store_commit().
 */
struct store_intent {
	char *key;          /* unique: "<op>:<name or id>", e.g. "create:pvc-123", "stage:sv-..." */
	char *op;           /* "create", "snapshot", "clone", "expand", "stage", "delete", ... */
	char *object_id;    /* the volume or snapshot id it acts on */
	char *detail;       /* op-specific text (JSON or k=v), may be "" */
	int64_t created_at; /* unix seconds, set by store_intent_put */
};

/*
 * Inserts the intent, or replaces the one with the same key (which then
 * counts as new: a new created_at, last in store_intent_list()). key and op
 * must be non-empty; a NULL object_id or detail is stored as "". The
 * created_at given is ignored.
 */
int store_intent_put(struct store *st, const struct store_intent *in);
/*
 * As store_intent_put(), for an intent whose operation only changes what a
 * reboot undoes (mounts, loop devices): it returns once the intent is
 * committed, without waiting for the commit to reach the disk. A crash of
 * the process still leaves it in the WAL; a power loss may take it, together
 * with everything it was about. The next commit that waits makes it durable.
 */
int store_intent_put_until_reboot(struct store *st, const struct store_intent *in);
int store_intent_get(struct store *st, const char *key, struct store_intent **out); /* NOTFOUND */
int store_intent_delete(struct store *st, const char *key); /* STORE_OK even if absent */
/* Every intent, oldest first (in the order they were put). Free with store_intent_list_free(). */
int store_intent_list(struct store *st, struct store_intent ***out, size_t *n);
void store_intent_free(struct store_intent *in);
void store_intent_list_free(struct store_intent **list, size_t n);

/*
 * Counts for metrics (store_tally.c): fn is called once per group with the
 * table ("volumes", "snapshots", "group_snapshots", "attachments",
 * "intents"), up to two labels ("" when unused), the number of rows and
 * their bytes. Volumes: (state: created|staged|published, kind: the file
 * system, "block" or "directory"), bytes promised. Snapshots: (single or
 * group_member), bytes. Attachments: (read_write|read_only). Intents: (op).
 * A table with no rows calls fn for no group. The store's lock is held
 * while fn runs: fn must not call the store.
 */
typedef void store_tally_fn(void *arg, const char *table, const char *label1, const char *label2,
                            int64_t rows, uint64_t bytes);
int store_tally(struct store *st, store_tally_fn *fn, void *arg);

/* Commits made and fdatasyncs of the WAL that made them durable, since the store was opened. */
void store_sync_counts(struct store *st, uint64_t *commits, uint64_t *syncs);

/*
 * An entry point that writes returns once what it wrote is durable; one that
 * only reads does not wait, but notes (per thread) the commits it may have
 * read. This returns once those are durable too: call it before anything
 * read goes out (rpcd: before each answer).
 */
void store_wait_read(struct store *st);

#endif
