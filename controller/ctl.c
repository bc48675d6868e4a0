/*
 * Controller plumbing: construction, the response arena, per-volume locks,
 * status helpers and the argument checks every RPC shares. Runs in rpcd,
 * unprivileged; nothing here is fatal except allocation failure.
 */
#include "ctl_int.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "grpc_codes.h"
#include "log.h"
#include "policy_all.h"

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);
	if (!p)
		abort();
	return p;
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s ? s : "");
	if (!p)
		abort();
	return p;
}

/* ---- status ---- */

int ctl_fail(struct ctl_status *st, enum ctl_code code, const char *fmt, ...)
{
	va_list ap;
	st->code = code;
	va_start(ap, fmt);
	vsnprintf(st->msg, sizeof(st->msg), fmt, ap);
	va_end(ap);
	return code;
}

const char *ctl_code_name(enum ctl_code code)
{
	const char *n = grpc_code_name((int)code);
	return n ? n : "UNKNOWN";
}

int ctl_fail_mh(struct ctl_status *st, const char *what, const struct mh_err *e)
{
	static const enum ctl_code map[] = {
	    [MH_E_OK] = CTL_INTERNAL,
	    [MH_E_REFUSED] = CTL_INVALID_ARGUMENT,
	    [MH_E_NOTFOUND] = CTL_NOT_FOUND,
	    [MH_E_EXISTS] = CTL_ALREADY_EXISTS,
	    [MH_E_BUSY] = CTL_FAILED_PRECONDITION,
	    [MH_E_NOSPACE] = CTL_RESOURCE_EXHAUSTED,
	    [MH_E_FAILED] = CTL_INTERNAL,
	    [MH_E_PRECONDITION] = CTL_FAILED_PRECONDITION,
	    [MH_E_UNAVAILABLE] = CTL_UNAVAILABLE,
	    [MH_E_TIMEOUT] = CTL_DEADLINE_EXCEEDED,
	};
	enum ctl_code code = CTL_INTERNAL;
	if ((unsigned)e->kind < sizeof(map) / sizeof(map[0]))
		code = map[e->kind];
	/*
	 * The helper's own refusals of concurrency (it trusts none of rpcd's
	 * locks): another operation on the volume in flight is the spec's
	 * ABORTED, all its workers taken is UNAVAILABLE; either is retried.
	 */
	if (e->kind == MH_E_BUSY && e->sys_errno == EINPROGRESS)
		code = CTL_ABORTED;
	else if (e->kind == MH_E_BUSY && e->sys_errno == EAGAIN)
		code = CTL_UNAVAILABLE;
	return ctl_fail(st, code, "%s: %s", what, e->reason[0] ? e->reason : "helper error");
}

int ctl_fail_store(struct ctl_status *st, const char *what, int rc)
{
	return ctl_fail(st, CTL_INTERNAL, "%s: store error %d: %s", what, rc, store_last_error());
}

/* ---- arena ---- */

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	max_align_t data[];
};

struct ctl_arena {
	struct arena_chunk *head;
};

struct ctl_arena *ctl_arena_new(void)
{
	return xcalloc(1, sizeof(struct ctl_arena));
}

void ctl_arena_free(struct ctl_arena *a)
{
	if (!a)
		return;
	for (struct arena_chunk *ch = a->head, *next; ch; ch = next) {
		next = ch->next;
		free(ch);
	}
	free(a);
}

void *ctl_alloc(struct ctl_arena *a, size_t n)
{
	const size_t align = sizeof(max_align_t);
	n = (n + align - 1) / align * align;
	struct arena_chunk *ch = a->head;
	if (!ch || ch->cap - ch->used < n) {
		size_t cap = n > 4096 ? n : 4096;
		ch = xcalloc(1, sizeof(*ch) + cap);
		ch->cap = cap;
		ch->next = a->head;
		a->head = ch;
	}
	void *p = (char *)ch->data + ch->used;
	ch->used += n;
	return p;
}

char *ctl_strdup(struct ctl_arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = ctl_alloc(a, n);
	memcpy(p, s, n);
	return p;
}

/* ---- locks ---- */

/*
 * Held keys, each with whether reconciliation holds it. Reconciliation holds
 * a key for one store read or one helper operation and never waits for one,
 * so a request that finds it there waits for it (no cycle can form), but at
 * most CTL_BACKGROUND_WAIT_S: a restage after a reboot may hold a key for
 * long, and a gRPC worker is not pinned behind it. A key another request
 * holds, or reconciliation holds past the wait, answers ABORTED.
 */
#define CTL_BACKGROUND_WAIT_S 1
struct held {
	char *key;
	bool background;
};

struct ctl_locks {
	pthread_mutex_t mu;
	pthread_cond_t released;
	struct held *held;
	size_t n, cap;
};

struct ctl_locks *ctl_locks_new(void)
{
	struct ctl_locks *l = xcalloc(1, sizeof(*l));
	pthread_condattr_t ca;
	pthread_mutex_init(&l->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->released, &ca);
	pthread_condattr_destroy(&ca);
	return l;
}

void ctl_locks_free(struct ctl_locks *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->held[i].key);
	free(l->held);
	pthread_cond_destroy(&l->released);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

static struct held *held_by(struct ctl_locks *l, const char *key)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->held[i].key, key) == 0)
			return &l->held[i];
	return NULL;
}

static bool lock_as(struct ctl *c, const char *key, bool background)
{
	struct ctl_locks *l = c->locks;
	struct held *h;
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += CTL_BACKGROUND_WAIT_S;
	pthread_mutex_lock(&l->mu);
	while (!background && (h = held_by(l, key)) && h->background &&
	       pthread_cond_timedwait(&l->released, &l->mu, &until) == 0)
		;
	bool ok = !held_by(l, key);
	if (ok) {
		if (l->n == l->cap) {
			l->cap = l->cap ? l->cap * 2 : 16;
			l->held = realloc(l->held, l->cap * sizeof(*l->held));
			if (!l->held)
				abort();
		}
		l->held[l->n++] = (struct held){xstrdup(key), background};
	}
	pthread_mutex_unlock(&l->mu);
	return ok;
}

bool ctl_lock(struct ctl *c, const char *key)
{
	return lock_as(c, key, false);
}

bool ctl_lock_background(struct ctl *c, const char *key)
{
	return lock_as(c, key, true);
}

void ctl_unlock(struct ctl *c, const char *key)
{
	struct ctl_locks *l = c->locks;
	pthread_mutex_lock(&l->mu);
	struct held *h = held_by(l, key);
	if (h) {
		free(h->key);
		*h = l->held[--l->n];
		pthread_cond_broadcast(&l->released);
	}
	pthread_mutex_unlock(&l->mu);
}

/* ---- construction ---- */

struct ctl *ctl_new(const struct ctl_config *cfg, struct store *st, struct mh_client *mh)
{
	struct ctl *c = xcalloc(1, sizeof(*c));
	c->cfg = *cfg;
	c->cfg.driver_name = xstrdup(cfg->driver_name);
	c->cfg.node_id = xstrdup(cfg->node_id);
	c->st = st;
	c->mh = mh;
	c->locks = ctl_locks_new();
	return c;
}

void ctl_free(struct ctl *c)
{
	if (!c)
		return;
	free((char *)c->cfg.driver_name);
	free((char *)c->cfg.node_id);
	ctl_locks_free(c->locks);
	free(c);
}

const struct ctl_config *ctl_config(const struct ctl *c)
{
	return &c->cfg;
}

/* ---- ids, sizes and topology ---- */

bool ctl_volume_is_ephemeral(const struct store_volume *v)
{
	return strncmp(v->name, CTL_EPHEMERAL_PREFIX, strlen(CTL_EPHEMERAL_PREFIX)) == 0;
}

int ctl_volume_get(struct ctl *c, const char *id, struct store_volume **v)
{
	if (!pol_volume_id_valid(id))
		return STORE_NOTFOUND;
	int rc = store_volume_get(c->st, id, v);
	if (rc == STORE_OK &&
	    (ctl_volume_is_ephemeral(*v) || (*v)->shared == STORE_SHARED_ADOPTED)) {
		store_volume_free(*v);
		*v = NULL;
		rc = STORE_NOTFOUND;
	}
	return rc;
}

int ctl_volume_resolve(struct ctl *c, struct ctl_status *st, const char *volume_id,
                       struct store_volume **v)
{
	int rc;
	if (pol_volume_id_valid(volume_id)) {
		rc = store_volume_get(c->st, volume_id, v);
	} else {
		char name[256];
		if (snprintf(name, sizeof(name), CTL_EPHEMERAL_PREFIX "%s", volume_id) >=
		    (int)sizeof(name))
			return ctl_fail(st, CTL_NOT_FOUND, "volume %.80s does not exist",
			                volume_id);
		rc = store_volume_get_by_name(c->st, name, v);
	}
	if (rc == STORE_NOTFOUND)
		return ctl_fail(st, CTL_NOT_FOUND, "volume %.80s does not exist", volume_id);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "look up volume", rc);
	return CTL_OK;
}

Csi__V1__Topology *ctl_node_topology(struct ctl *c, struct ctl_arena *a)
{
	Csi__V1__Topology *t = ctl_alloc(a, sizeof(*t));
	csi__v1__topology__init(t);
	Csi__V1__Topology__SegmentsEntry *e = ctl_alloc(a, sizeof(*e));
	csi__v1__topology__segments_entry__init(e);
	e->key = ctl_strdup(a, CTL_TOPOLOGY_KEY);
	e->value = ctl_strdup(a, c->cfg.node_id);
	t->n_segments = 1;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
	t->segments = ctl_alloc(a, sizeof(*t->segments));
	t->segments[0] = e;
	return t;
}

/* ---- argument checks ---- */

int ctl_check_required(struct ctl_status *st, const char *value, const char *field)
{
	if (!value || !*value)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "%s is required", field);
	return CTL_OK;
}

/*
 * Syntax only: the helper decides whether a path lies beneath an allowed root,
 * and re-checks the syntax itself. Catching the obvious here gives the CO a
 * clear INVALID_ARGUMENT without a round trip to the privileged side.
 */
int ctl_check_path(struct ctl_status *st, const char *path, const char *field)
{
	if (ctl_check_required(st, path, field))
		return st->code;
	if (path[0] != '/' || strlen(path) > MH_PATH_MAX)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "%s must be an absolute path of at most %d bytes", field,
		                MH_PATH_MAX);
	/* The helper's own rule (policy/syntax.c): one spelling per path. */
	if (!pol_path_syntax_ok(path))
		return ctl_fail(
		    st, CTL_INVALID_ARGUMENT,
		    "%s must be a canonical path: no control character, no empty, '.' "
		    "or '..' component, no trailing '/', at most %d bytes per component",
		    field, NAME_MAX);
	return CTL_OK;
}

bool ctl_mode_readonly(const Csi__V1__VolumeCapability *cap)
{
	return cap->access_mode && ctl_access_mode_readonly((int)cap->access_mode->mode);
}

bool ctl_access_mode_readonly(int mode)
{
	switch (mode) {
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY:
		return true;
	default:
		return false;
	}
}

bool ctl_access_mode_multi_node(int mode)
{
	return mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY ||
	       mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_SINGLE_WRITER ||
	       mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
}

const char *ctl_cap_fs_type(const Csi__V1__VolumeCapability *cap)
{
	if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT || !cap->mount ||
	    !cap->mount->fs_type)
		return "";
	return cap->mount->fs_type;
}

static bool fs_type_supported(const char *fs)
{
	return fs[0] == '\0' || pol_fs_known(fs);
}

/*
 * A capability this driver can honour: a mount (ext4, xfs or btrfs) or raw
 * block access, and a single-node access mode. Image volumes live on one node, so multi-node modes
 * are refused here rather than failing later on another node.
 */
int ctl_check_capability(struct ctl_status *st, const Csi__V1__VolumeCapability *cap,
                         const char *field)
{
	return ctl_check_capability_modes(st, cap, field, false);
}

int ctl_check_capability_modes(struct ctl_status *st, const Csi__V1__VolumeCapability *cap,
                               const char *field, bool multi_node)
{
	if (!cap)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "%s is required", field);
	if (!cap->access_mode)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "%s.access_mode is required", field);
	switch (cap->access_mode->mode) {
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER:
		break;
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__UNKNOWN:
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "%s.access_mode.mode is required", field);
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_SINGLE_WRITER:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER:
		if (multi_node)
			break;
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "%s.access_mode %d is not supported: sepcsi volumes are node-local "
		                "and support only single-node access modes (except directory "
		                "volumes on a shared base)",
		                field, (int)cap->access_mode->mode);
	default:
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "%s.access_mode %d is no CSI access mode",
		                field, (int)cap->access_mode->mode);
	}
	switch (cap->access_type_case) {
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT:
		if (!fs_type_supported(ctl_cap_fs_type(cap)))
			return ctl_fail(st, CTL_INVALID_ARGUMENT,
			                "%s.mount.fs_type '%s' is not supported (ext4, xfs, btrfs)",
			                field, ctl_cap_fs_type(cap));
		return CTL_OK;
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK:
		return CTL_OK;
	default:
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "%s.access_type is required (mount or block)", field);
	}
}

int ctl_cap_mount_flags(struct ctl_status *st, const Csi__V1__VolumeCapability *cap, char *out,
                        size_t outsz)
{
	size_t len = 0;
	out[0] = '\0';
	if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT || !cap->mount)
		return CTL_OK;
	for (size_t i = 0; i < cap->mount->n_mount_flags; i++) {
		const char *f = cap->mount->mount_flags[i];
		size_t n = strlen(f);
		if (n == 0)
			continue;
		if (strchr(f, ','))
			return ctl_fail(
			    st, CTL_INVALID_ARGUMENT,
			    "volume_capability.mount.mount_flags: one option per entry");
		if (len + n + 2 > outsz)
			return ctl_fail(st, CTL_INVALID_ARGUMENT,
			                "volume_capability.mount.mount_flags exceed %zu bytes",
			                outsz);
		if (len)
			out[len++] = ',';
		memcpy(out + len, f, n + 1);
		len += n;
	}
	return CTL_OK;
}

/* ---- Controller and GroupController services: ids, names, key sets, time ---- */

static void new_hex_id(char out[36], const char *prefix)
{
	unsigned char rnd[16];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		abort();
	memcpy(out, prefix, 3);
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(out + 3 + 2 * i, 3, "%02x", rnd[i]);
}

void ctl_new_volume_id(char out[36])
{
	new_hex_id(out, "sv-");
}

void ctl_new_snapshot_id(char out[36])
{
	new_hex_id(out, "ss-");
}

void ctl_new_group_id(char out[36])
{
	new_hex_id(out, "gs-");
}

int ctl_check_name(struct ctl_status *st, const char *name, const char *field)
{
	if (ctl_check_required(st, name, field))
		return st->code;
	if (strlen(name) > 128)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "%s is longer than 128 bytes", field);
	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		/* U+0000..U+0008, U+000B, U+000C, U+000E..U+001F, U+007F; U+0080..U+009F is
		 * C2 80..9F */
		if ((*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') || *p == 0x7f ||
		    (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
			return ctl_fail(st, CTL_INVALID_ARGUMENT,
			                "%s contains a forbidden control character", field);
	}
	return CTL_OK;
}

static bool lock_keys_as(struct ctl *c, const char *const *keys, size_t n, const char **busy,
                         bool background)
{
	for (size_t i = 0; i < n; i++) {
		bool dup = false;
		for (size_t j = 0; j < i; j++)
			dup = dup || strcmp(keys[i], keys[j]) == 0;
		if (dup)
			continue;
		if (!lock_as(c, keys[i], background)) {
			if (busy)
				*busy = keys[i];
			ctl_unlock_keys(c, keys, i);
			return false;
		}
	}
	return true;
}

bool ctl_lock_keys(struct ctl *c, const char *const *keys, size_t n, const char **busy)
{
	return lock_keys_as(c, keys, n, busy, false);
}

bool ctl_lock_keys_background(struct ctl *c, const char *const *keys, size_t n)
{
	return lock_keys_as(c, keys, n, NULL, true);
}

void ctl_unlock_keys(struct ctl *c, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bool dup = false;
		for (size_t j = 0; j < i; j++)
			dup = dup || strcmp(keys[i], keys[j]) == 0;
		if (!dup)
			ctl_unlock(c, keys[i]);
	}
}

int64_t ctl_now_unix_ns(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
}

Google__Protobuf__Timestamp *ctl_timestamp(struct ctl_arena *a, int64_t unix_ns)
{
	Google__Protobuf__Timestamp *t = ctl_alloc(a, sizeof(*t));
	google__protobuf__timestamp__init(t);
	t->seconds = unix_ns / 1000000000LL;
	t->nanos = (int32_t)(unix_ns % 1000000000LL);
	return t;
}
