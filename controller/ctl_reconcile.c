/*
 * Reconciliation: after rpcd starts and after every helper restart, make the
 * node agree with the store again. In this order:
 *
 *  1. settle the intents (ctl_intent.c) no request holds: each op below says
 *     when its intent is done already, and what completes or undoes it;
 *  2. ask the helper what it made (MH_REQ_LIST: mounts, images, snapshots),
 *     then read the store: a mount that no row and no intent accounts for is
 *     left over from an attempt that is settled, and is removed through the
 *     ordinary requests (UNPUBLISH, UNSTAGE), which the helper checks as it
 *     checks every request; an image or snapshot no row and no intent
 *     accounts for is kept and reported (orphan_file);
 *  3. a staging or publication the store records but the helper does not
 *     list (a reboot took the mounts and loop devices) is staged or published
 *     again, so the volume is back before the CO asks.
 * The helper's list is read before the store, and every request writes its
 * intent before it asks the helper, so whatever a request in flight makes is
 * either not listed yet or accounted for. Every action takes the keys the
 * requests take, as background keys (a busy key means a request is on it:
 * skipped, not waited for; a request that finds a key held here waits for it
 * rather than answer ABORTED), and reads the store again under them.
 *
 * Runs in rpcd, unprivileged, on a thread of its own (rpcd_main.c).
 */
#include "ctl_cs.h"
#include "ctl_intent.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mh_proto_all.h"

#define ACCESS_BLOCK 1

/* ---- 1. intents -------------------------------------------------------------------------- */

/* "b|f <path>": is it raw block, and the path. */
static const char *detail_path(const char *detail, bool *block)
{
	*block = detail[0] == 'b';
	return detail[0] && detail[1] == ' ' ? detail + 2 : "";
}

/* The helper's answer, logged when it is a failure; true if it did (or found done) the work. */
static bool helper_ok(int rc, const struct mh_err *e, const char *what, const char *id)
{
	if (rc == 0 || e->kind == MH_E_NOTFOUND)
		return true;
	log_kv(LOG_LVL_WARN, "reconcile_failed", "action", what, "id", id, "reason", e->reason,
	       NULL);
	return false;
}

static bool volume_exists(struct ctl *c, const char *id)
{
	struct store_volume *v = NULL;
	bool yes = store_volume_get(c->st, id, &v) == STORE_OK;
	store_volume_free(v);
	return yes;
}

static bool staged_at(struct ctl *c, const char *vid, const char *path)
{
	struct store_staging *s = NULL;
	bool yes = store_staging_get(c->st, vid, &s) == STORE_OK &&
	           (!path || strcmp(s->staging_path, path) == 0);
	store_staging_free(s);
	return yes;
}

static bool published_at(struct ctl *c, const char *vid, const char *target)
{
	struct store_publication *p = NULL;
	bool yes = store_publication_get(c->st, vid, target, &p) == STORE_OK;
	store_publication_free(p);
	return yes;
}

/*
 * Remove a volume's data as an intent about it names it: the image, or
 * (a directory volume's intent detail, ctl_dir_detail) its directory with
 * the mode given, or the detail's own "mode" (a delete's). 0 or -1 with *e.
 */
static int remove_volume_data(struct ctl *c, const struct store_intent *in, int mode,
                              struct mh_err *e)
{
	struct mh_req_dir q = {0};
	char m[16];
	if (!ctl_dir_detail_get(in->detail, &q))
		return mh_delete(c->mh, in->object_id, e);
	snprintf(q.volume_id, sizeof(q.volume_id), "%s", in->object_id);
	q.mode = (uint8_t)mode;
	if (mode < 0 &&
	    (!ctl_canon_get(in->detail, "mode", m, sizeof(m)) || !ctl_dir_mode_parse(m, &q.mode)))
		q.mode = MH_DIR_RETAIN; /* unreadable: keep the data */
	return mh_dir(c->mh, MH_REQ_DIR_DELETE, &q, NULL, e);
}

/* A snapshot's copy, as its intent names it (a directory snapshot's detail has its base). */
static int remove_snapshot_copy(struct ctl *c, const char *id, const char *detail, struct mh_err *e)
{
	struct mh_req_dir q = {0};
	bool dir = ctl_dir_detail_get(detail, &q);
	return ctl_snapshot_remove(c, id, dir ? q.base : NULL, e);
}

/* Each returns true when the intent is settled (done, completed or undone). */

static bool settle_create(struct ctl *c, const struct store_intent *in)
{
	struct mh_err e;
	return volume_exists(c, in->object_id) ||
	       helper_ok(remove_volume_data(c, in, MH_DIR_DELETE, &e), &e,
	                 "remove unrecorded volume data", in->object_id);
}

static bool settle_delete(struct ctl *c, const struct store_intent *in)
{
	struct mh_err e;
	if (!helper_ok(remove_volume_data(c, in, -1, &e), &e, "finish delete", in->object_id))
		return false;
	int rc = store_volume_delete(c->st, in->object_id);
	return rc == STORE_OK || rc == STORE_NOTFOUND;
}

static bool settle_snapshot(struct ctl *c, const struct store_intent *in)
{
	struct store_snapshot *s = NULL;
	struct mh_err e;
	bool done = store_snapshot_get(c->st, in->object_id, &s) == STORE_OK;
	store_snapshot_free(s);
	return done || helper_ok(remove_snapshot_copy(c, in->object_id, in->detail, &e), &e,
	                         "remove unrecorded snapshot", in->object_id);
}

static bool settle_delete_snap(struct ctl *c, const struct store_intent *in)
{
	struct mh_err e;
	if (!helper_ok(remove_snapshot_copy(c, in->object_id, in->detail, &e), &e,
	               "finish snapshot delete", in->object_id))
		return false;
	int rc = store_snapshot_delete(c->st, in->object_id);
	return rc == STORE_OK || rc == STORE_NOTFOUND;
}

static bool settle_group(struct ctl *c, const struct store_intent *in)
{
	struct store_group_snapshot *g = NULL;
	bool done = store_group_snapshot_get(c->st, in->object_id, &g) == STORE_OK;
	store_group_snapshot_free(g);
	if (done)
		return true;
	char *ids = strdup(in->detail), *save = NULL;
	bool ok = ids != NULL;
	for (char *id = ids ? strtok_r(ids, " ", &save) : NULL; id;
	     id = strtok_r(NULL, " ", &save)) {
		struct mh_err e;
		ok = helper_ok(mh_delete_snapshot(c->mh, id, &e), &e, "remove unrecorded snapshot",
		               id) &&
		     ok;
	}
	free(ids);
	return ok;
}

/* A group delete cut short: its members' images and then its rows go, as the request does. */
static bool settle_delete_group(struct ctl *c, const struct store_intent *in)
{
	struct store_snapshot **m = NULL;
	size_t n = 0;
	bool ok = store_snapshot_list_group(c->st, in->object_id, &m, &n) == STORE_OK;
	for (size_t i = 0; ok && i < n; i++) {
		struct mh_err e;
		ok = helper_ok(mh_delete_snapshot(c->mh, m[i]->id, &e), &e,
		               "finish group snapshot delete", m[i]->id);
	}
	store_snapshot_list_free(m, n);
	int rc = ok ? store_group_snapshot_delete(c->st, in->object_id) : STORE_OK;
	return ok && (rc == STORE_OK || rc == STORE_NOTFOUND);
}

static bool settle_expand(struct ctl *c, const struct store_intent *in)
{
	struct store_volume *v = NULL;
	long long want = strtoll(in->detail, NULL, 10);
	bool ok = true;
	if (store_volume_get(c->st, in->object_id, &v) != STORE_OK)
		return true; /* deleted since */
	if (v->capacity_bytes < want) {
		uint64_t real = 0;
		struct mh_err e;
		ok = helper_ok(ctl_volume_grow(c, v, (uint64_t)want, &real, &e), &e,
		               "finish expansion", v->id);
		if (ok && real > 0) {
			v->capacity_bytes = (int64_t)real;
			ok = store_volume_update(c->st, v) == STORE_OK;
		}
	}
	store_volume_free(v);
	return ok;
}

static bool settle_stage(struct ctl *c, const struct store_intent *in)
{
	bool block;
	const char *path = detail_path(in->detail, &block);
	struct mh_err e;
	return staged_at(c, in->object_id, path) ||
	       helper_ok(mh_unstage_flags(c->mh, in->object_id, path, block ? MH_F_BLOCK : 0, &e),
	                 &e, "undo unrecorded staging", in->object_id);
}

static bool settle_unstage(struct ctl *c, const struct store_intent *in)
{
	bool block;
	const char *path = detail_path(in->detail, &block);
	struct mh_err e;
	if (!staged_at(c, in->object_id, path))
		return true;
	if (!helper_ok(mh_unstage_flags(c->mh, in->object_id, path, block ? MH_F_BLOCK : 0, &e), &e,
	               "finish unstage", in->object_id))
		return false;
	int rc = store_staging_delete(c->st, in->object_id);
	return rc == STORE_OK || rc == STORE_NOTFOUND;
}

/* Undo a publication: a directory volume's bind (DIR_UNPUBLISH), or UNPUBLISH. */
static int unpublish(struct ctl *c, const char *vid, const char *target, struct mh_err *e)
{
	struct store_volume *v = NULL;
	int rc = store_volume_get(c->st, vid, &v) == STORE_OK && ctl_volume_is_dir(v)
	             ? ctl_dir_unpublish(c, v, target, e)
	             : mh_unpublish(c->mh, vid, target, e);
	store_volume_free(v);
	return rc;
}

static bool settle_publish(struct ctl *c, const struct store_intent *in)
{
	bool block;
	const char *target = detail_path(in->detail, &block);
	struct mh_err e;
	return published_at(c, in->object_id, target) ||
	       helper_ok(unpublish(c, in->object_id, target, &e), &e, "undo unrecorded publication",
	                 in->object_id);
}

static bool settle_unpublish(struct ctl *c, const struct store_intent *in)
{
	bool block;
	const char *target = detail_path(in->detail, &block);
	struct mh_err e;
	if (!published_at(c, in->object_id, target))
		return true;
	if (!helper_ok(unpublish(c, in->object_id, target, &e), &e, "finish unpublish",
	               in->object_id))
		return false;
	int rc = store_publication_delete(c->st, in->object_id, target);
	return rc == STORE_OK || rc == STORE_NOTFOUND;
}

/* An ephemeral volume: undone (or, for the end, finished) as one piece. */
static bool remove_ephemeral(struct ctl *c, const struct store_intent *in)
{
	struct mh_err e;
	const char *target = in->detail;
	if (!helper_ok(mh_unstage_flags(c->mh, in->object_id, target, MH_F_REMOVE_DIR, &e), &e,
	               "remove ephemeral mount", in->object_id) ||
	    !helper_ok(mh_delete(c->mh, in->object_id, &e), &e, "remove ephemeral image",
	               in->object_id))
		return false;
	int a = store_staging_delete(c->st, in->object_id);
	int b = store_volume_delete(c->st, in->object_id);
	return (a == STORE_OK || a == STORE_NOTFOUND) && (b == STORE_OK || b == STORE_NOTFOUND);
}

static bool settle_ephemeral(struct ctl *c, const struct store_intent *in)
{
	return staged_at(c, in->object_id, in->detail) || remove_ephemeral(c, in);
}

static const struct {
	const char *op;
	const char *lock_prefix; /* the subject is locked with this prefix; NULL: the object id */
	bool (*settle)(struct ctl *c, const struct store_intent *in);
} ops[] = {
    {CTL_OP_CREATE, CTL_KEY_VOLUME_NAME, settle_create},
    {CTL_OP_DELETE, NULL, settle_delete},
    {CTL_OP_SNAPSHOT, CTL_KEY_SNAPSHOT_NAME, settle_snapshot},
    {CTL_OP_DELETE_SNAP, NULL, settle_delete_snap},
    {CTL_OP_GROUP, CTL_KEY_GROUP_NAME, settle_group},
    {CTL_OP_DELETE_GROUP, NULL, settle_delete_group},
    {CTL_OP_EXPAND, NULL, settle_expand},
    {CTL_OP_STAGE, NULL, settle_stage},
    {CTL_OP_UNSTAGE, NULL, settle_unstage},
    {CTL_OP_PUBLISH, NULL, settle_publish},
    {CTL_OP_UNPUBLISH, NULL, settle_unpublish},
    {CTL_OP_EPHEMERAL, "", settle_ephemeral},
    {CTL_OP_EPHEMERAL_END, "", remove_ephemeral},
};

/* The key's subject: what follows "<op>:". */
static const char *subject_of(const struct store_intent *in)
{
	const char *colon = strchr(in->key, ':');
	return colon ? colon + 1 : in->key;
}

static size_t op_index(const char *op)
{
	size_t i = 0;
	while (i < sizeof(ops) / sizeof(ops[0]) && strcmp(ops[i].op, op) != 0)
		i++;
	return i;
}

/* Settle the intent with this key, if there is one; its keys are held. 0 or -1. */
static int settle_held(struct ctl *c, const char *key)
{
	struct store_intent *in = NULL;
	int ret = 0;
	if (store_intent_get(c->st, key, &in) != STORE_OK)
		return 0; /* settled meanwhile (or unreadable: the next run sees) */
	size_t i = op_index(in->op);
	bool settled = i < sizeof(ops) / sizeof(ops[0]) && ops[i].settle(c, in);
	log_kv(settled ? LOG_LVL_INFO : LOG_LVL_WARN, "reconcile_intent", "key", in->key,
	       "object_id", in->object_id, "result", settled ? "settled" : "left", NULL);
	if (!settled || store_intent_delete(c->st, in->key) != STORE_OK)
		ret = -1;
	store_intent_free(in);
	return ret;
}

int ctl_intent_settle_held(struct ctl *c, const char *op, const char *subject)
{
	char key[CTL_INTENT_KEY_MAX];
	snprintf(key, sizeof(key), "%s:%s", op, subject);
	return settle_held(c, key);
}

/* Settle one intent under its keys; 0 settled, -1 left for later. */
static int settle_one(struct ctl *c, const struct store_intent *in)
{
	size_t i = op_index(in->op);
	if (i == sizeof(ops) / sizeof(ops[0])) {
		log_kv(LOG_LVL_WARN, "reconcile_unknown_intent", "key", in->key, NULL);
		return -1;
	}
	char name_key[CTL_INTENT_KEY_MAX];
	const char *keys[2] = {in->object_id, in->object_id};
	if (ops[i].lock_prefix) {
		snprintf(name_key, sizeof(name_key), "%s%s", ops[i].lock_prefix, subject_of(in));
		keys[1] = name_key;
	}
	if (!ctl_lock_keys_background(c, keys, 2))
		return -1; /* a request is on it: its own end settles it */
	/* Read again under the keys: the request may have finished meanwhile. */
	int ret = settle_held(c, in->key);
	ctl_unlock_keys(c, keys, 2);
	return ret;
}

static int settle_intents(struct ctl *c)
{
	struct store_intent **l = NULL;
	size_t n = 0;
	int ret = 0;
	if (store_intent_list(c->st, &l, &n) != STORE_OK)
		return -1;
	for (size_t i = 0; i < n; i++)
		ret |= settle_one(c, l[i]);
	store_intent_list_free(l, n);
	return ret;
}

/* ---- 2. and 3. what the helper made, against the store ----------------------------------- */

/* Every LIST, pages together, at most this long: a helper gone wrong does not exhaust rpcd. */
#define LIST_ALL_MAX (64u << 20)

/* Does a LIST's cursor move on (mount ids by number, names in order)? Else its pages loop. */
static bool moves_on(uint32_t what, const char *cursor, const char *next)
{
	if (what == MH_LIST_MOUNTS)
		return strtoull(next, NULL, 10) > strtoull(cursor, NULL, 10);
	return strcmp(next, cursor) > 0;
}

/* Every page of one LIST, as one text (caller frees), or NULL. */
static char *list_all(struct ctl *c, uint32_t what)
{
	struct mh_ans_list *page = calloc(1, sizeof(*page));
	char after[MH_ID_MAX + 1] = "", *all = strdup("");
	size_t len = 0;
	struct mh_err e;
	do {
		if (!page || !all || mh_list(c->mh, what, after, page, &e) != 0) {
			free(all);
			all = NULL;
			break;
		}
		size_t add = strlen(page->text);
		char *grown = realloc(all, len + add + 1);
		if (!grown) {
			free(all);
			all = NULL;
			break;
		}
		all = grown;
		memcpy(all + len, page->text, add + 1);
		len += add;
		/* The next page starts after the last line's first word. */
		const char *last = page->text + add;
		while (last > page->text && last[-1] == '\n')
			last--;
		while (last > page->text && last[-1] != '\n')
			last--;
		char next[sizeof(after)];
		snprintf(next, sizeof(next), "%.*s", (int)strcspn(last, " "), last);
		const char *cursor = after;
		if (page->more && (!moves_on(what, cursor, next) || len > LIST_ALL_MAX)) {
			log_kv(LOG_LVL_ERROR, "list_refused", "why",
			       "a page that does not move on, or a list past 64 MiB", NULL);
			free(all);
			all = NULL;
			break;
		}
		memcpy(after, next, sizeof(after));
	} while (page->more && after[0]);
	free(page);
	return all;
}

/* Is any unsettled intent about this object? */
static bool intent_names(struct ctl *c, const char *id)
{
	struct store_intent **l = NULL;
	size_t n = 0;
	bool yes = false;
	if (store_intent_list(c->st, &l, &n) != STORE_OK)
		return true; /* cannot tell: leave it */
	for (size_t i = 0; i < n && !yes; i++)
		yes = strcmp(l[i]->object_id, id) == 0 || strstr(l[i]->detail, id) != NULL;
	store_intent_list_free(l, n);
	return yes;
}

/*
 * A mount of one of our volumes that no row accounts for: undone as a
 * publication, or as a staging (a raw block staging is the node "dev"
 * beneath the staging directory).
 */
static int orphan_mount(struct ctl *c, const char *vid, char kind, char *path)
{
	struct mh_err e;
	size_t n = strlen(path);
	bool block_staging = kind == 'b' && n > 4 && strcmp(path + n - 4, "/dev") == 0;
	if (block_staging)
		path[n - 4] = '\0';
	if (staged_at(c, vid, path) || published_at(c, vid, path) || intent_names(c, vid))
		return 0;
	log_kv(LOG_LVL_WARN, "reconcile_orphan", "what", "mount", "volume_id", vid, "path", path,
	       NULL);
	if (block_staging)
		return helper_ok(mh_unstage_flags(c->mh, vid, path, MH_F_BLOCK, &e), &e,
		                 "remove unrecorded staging", vid)
		           ? 0
		           : -1;
	if (unpublish(c, vid, path, &e) == 0)
		return 0;
	/* Not a target path by the policy: a file system staging. */
	return helper_ok(mh_unstage_flags(c->mh, vid, path, 0, &e), &e, "remove unrecorded staging",
	                 vid)
	           ? 0
	           : -1;
}

/*
 * An image or snapshot that neither a row nor an intent accounts for. Every
 * request writes its intent before the helper makes anything and drops it
 * only once the row says what was made, so no settled attempt leaves one: it
 * means the store lost rows (a wiped or older --state-dir, a restored backup).
 * Removing it would destroy a volume's data on the word of a store that is
 * known to be missing something, so it is kept and reported; the operator
 * decides (docs/operations.md, "Unrecorded images").
 */
static int orphan_file(struct ctl *c, const char *id, bool snapshot, unsigned *kept)
{
	struct store_snapshot *s = NULL;
	bool known =
	    snapshot ? store_snapshot_get(c->st, id, &s) == STORE_OK : volume_exists(c, id);
	store_snapshot_free(s);
	if (known || intent_names(c, id))
		return 0;
	log_kv(LOG_LVL_WARN, "reconcile_unrecorded", "what", snapshot ? "snapshot" : "image", "id",
	       id, "action", "kept: the store has no row for it", NULL);
	kept[snapshot]++;
	return 0;
}

/* One line of a LIST answer, split in place: the words, then the rest (a path). */
static size_t split(char *line, char **w, size_t max)
{
	size_t n = 0;
	for (char *p = line; n < max && p;) {
		w[n++] = p;
		p = n < max ? strchr(p, ' ') : NULL;
		if (p)
			*p++ = '\0';
	}
	return n;
}

static int orphans(struct ctl *c, char *mounts)
{
	int ret = 0;
	char *images = list_all(c, MH_LIST_IMAGES), *snaps = list_all(c, MH_LIST_SNAPSHOTS);
	char *save = NULL, *w[4];
	unsigned kept[2] = {0, 0};
	if (!images || !snaps) {
		free(images);
		free(snaps);
		return -1;
	}
	/* Mounts first: an image still mounted cannot be removed. */
	for (char *l = strtok_r(mounts, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (split(l, w, 4) != 4 || !ctl_lock_background(c, w[2])) {
			ret = -1;
			continue;
		}
		ret |= orphan_mount(c, w[2], w[1][0], w[3]);
		ctl_unlock(c, w[2]);
	}
	for (int snap = 0; snap < 2; snap++) {
		for (char *l = strtok_r(snap ? snaps : images, "\n", &save); l;
		     l = strtok_r(NULL, "\n", &save)) {
			if (split(l, w, 2) != 2 || !ctl_lock_background(c, w[0])) {
				ret = -1;
				continue;
			}
			ret |= orphan_file(c, w[0], snap, kept);
			ctl_unlock(c, w[0]);
		}
	}
	atomic_store(&c->unrecorded[0], kept[0]);
	atomic_store(&c->unrecorded[1], kept[1]);
	free(images);
	free(snaps);
	return ret;
}

/*
 * The mount list's lines "<id> <kind> <vid> <path>" by their "<vid> <path>",
 * sorted: one look per store row costs O(log n), so bringing n volumes back
 * costs O(n log n), not O(n^2).
 */
struct mount_index {
	char *text; /* a copy of the list, cut into lines */
	char **key; /* into text: where "<vid> <path>" starts on each line */
	size_t n;
};

static int by_key(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int index_mounts(const char *mounts, struct mount_index *ix)
{
	size_t lines = 1;
	char *save = NULL;
	for (const char *p = mounts; *p; p++)
		lines += *p == '\n';
	ix->n = 0;
	ix->text = strdup(mounts);
	ix->key = calloc(lines, sizeof(*ix->key));
	if (!ix->text || !ix->key) {
		free(ix->text);
		free(ix->key);
		return -1;
	}
	for (char *l = strtok_r(ix->text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(l, ' ');
		sp = sp ? strchr(sp + 1, ' ') : NULL; /* past "<id> <kind>" */
		if (sp)
			ix->key[ix->n++] = sp + 1;
	}
	qsort(ix->key, ix->n, sizeof(*ix->key), by_key);
	return 0;
}

/* Is there a line "<id> <kind> <vid> <path>" in the mount list? */
static bool listed(const struct mount_index *ix, const char *vid, const char *path)
{
	char want[MH_PATH_MAX + MH_ID_MAX + 8];
	const char *k = want;
	snprintf(want, sizeof(want), "%s %s", vid, path);
	return bsearch(&k, ix->key, ix->n, sizeof(*ix->key), by_key) != NULL;
}

static int restage(struct ctl *c, const struct store_staging *s, const struct mount_index *mounts)
{
	char dev[MH_PATH_MAX + 8];
	bool block = s->access_type == ACCESS_BLOCK;
	snprintf(dev, sizeof(dev), "%s%s", s->staging_path, block ? "/dev" : "");
	struct store_volume *v = NULL;
	if (listed(mounts, s->volume_id, dev) ||
	    store_volume_get(c->st, s->volume_id, &v) != STORE_OK)
		return 0;
	if (ctl_volume_is_dir(v)) { /* nothing is mounted at a directory volume's staging */
		store_volume_free(v);
		return 0;
	}
	struct mh_req_stage ms = {.flags = block ? MH_F_BLOCK : 0,
	                          .readonly = ctl_access_mode_readonly(s->access_mode)};
	snprintf(ms.volume_id, sizeof(ms.volume_id), "%s", s->volume_id);
	snprintf(ms.staging_path, sizeof(ms.staging_path), "%s", s->staging_path);
	if (!block) {
		snprintf(ms.fs_type, sizeof(ms.fs_type), "%s", s->fs_type);
		snprintf(ms.mount_flags, sizeof(ms.mount_flags), "%s", s->mount_flags);
		ctl_volume_mount_extras(v, &ms);
	}
	if (s->mount_group) {
		ms.flags |= MH_F_MOUNT_GROUP;
		ms.gid = (uint32_t)s->mount_group;
	}
	store_volume_free(v);
	log_kv(LOG_LVL_INFO, "reconcile_restore", "what", "staging", "volume_id", s->volume_id,
	       "path", s->staging_path, NULL);
	struct mh_err e;
	return helper_ok(mh_stage(c->mh, &ms, &e), &e, "stage again", s->volume_id) ? 0 : -1;
}

/* A directory volume's publication: bound again, with the staging's mount group. */
static int republish_dir(struct ctl *c, const struct store_volume *v,
                         const struct store_publication *p)
{
	struct store_staging *s = NULL;
	struct mh_err e;
	uint32_t gid = 0;
	if (store_staging_get(c->st, v->id, &s) == STORE_OK)
		gid = (uint32_t)s->mount_group;
	store_staging_free(s);
	log_kv(LOG_LVL_INFO, "reconcile_restore", "what", "publication", "volume_id", v->id, "path",
	       p->target_path, NULL);
	return helper_ok(
	           ctl_dir_publish(c, v, p->target_path, p->readonly, gid, p->access_mode, &e), &e,
	           "publish again", v->id)
	           ? 0
	           : -1;
}

static int republish(struct ctl *c, const struct store_publication *p,
                     const struct mount_index *mounts)
{
	struct store_volume *v = NULL;
	if (listed(mounts, p->volume_id, p->target_path))
		return 0;
	if (store_volume_get(c->st, p->volume_id, &v) == STORE_OK && ctl_volume_is_dir(v)) {
		int rc = republish_dir(c, v, p);
		store_volume_free(v);
		return rc;
	}
	store_volume_free(v);
	struct mh_req_publish mp = {.readonly = p->readonly,
	                            .flags = p->access_type == ACCESS_BLOCK ? MH_F_BLOCK : 0};
	snprintf(mp.volume_id, sizeof(mp.volume_id), "%s", p->volume_id);
	snprintf(mp.staging_path, sizeof(mp.staging_path), "%s", p->staging_path);
	snprintf(mp.target_path, sizeof(mp.target_path), "%s", p->target_path);
	log_kv(LOG_LVL_INFO, "reconcile_restore", "what", "publication", "volume_id", p->volume_id,
	       "path", p->target_path, NULL);
	struct mh_err e;
	return helper_ok(mh_publish(c->mh, &mp, &e), &e, "publish again", p->volume_id) ? 0 : -1;
}

/* 3. Mounts the store records and the helper does not list: after a reboot. */
static int restore(struct ctl *c, const char *list)
{
	struct store_staging **s = NULL;
	struct store_publication **p = NULL;
	struct mount_index ix;
	size_t ns = 0, np = 0;
	int ret = 0;
	if (index_mounts(list, &ix) < 0)
		return -1;
	if (store_staging_list(c->st, &s, &ns) != STORE_OK ||
	    store_publication_list(c->st, &p, &np) != STORE_OK)
		ret = -1;
	for (size_t i = 0; i < ns; i++) {
		if (!ctl_lock_background(c, s[i]->volume_id)) {
			ret = -1;
			continue;
		}
		/* Read again under the key: unstaged meanwhile, or an ephemeral volume's. */
		if (staged_at(c, s[i]->volume_id, s[i]->staging_path))
			ret |= restage(c, s[i], &ix);
		ctl_unlock(c, s[i]->volume_id);
	}
	for (size_t i = 0; i < np; i++) {
		if (!ctl_lock_background(c, p[i]->volume_id)) {
			ret = -1;
			continue;
		}
		if (published_at(c, p[i]->volume_id, p[i]->target_path))
			ret |= republish(c, p[i], &ix);
		ctl_unlock(c, p[i]->volume_id);
	}
	store_staging_list_free(s, ns);
	store_publication_list_free(p, np);
	free(ix.text);
	free(ix.key);
	return ret;
}

int ctl_reconcile(struct ctl *c)
{
	int ret = settle_intents(c);
	char *mounts = list_all(c, MH_LIST_MOUNTS);
	if (!mounts)
		return -1;
	char *copy = strdup(mounts);
	ret |= restore(c, mounts);
	ret |= copy ? orphans(c, copy) : -1;
	free(copy);
	free(mounts);
	log_kv(ret == 0 ? LOG_LVL_INFO : LOG_LVL_WARN, "reconciled", "result",
	       ret == 0 ? "everything settled" : "some left for the next run", NULL);
	return ret;
}

unsigned ctl_unrecorded(struct ctl *c, bool snapshot)
{
	return atomic_load(&c->unrecorded[snapshot]);
}
