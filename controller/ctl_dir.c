/*
 * Directory volumes: what the Controller and Node services share about a
 * volume that is a directory beneath a base directory rather than an image
 * (StorageClass parameter type: directory). The helper makes, binds,
 * measures and removes the directory (MH_REQ_DIR_*); it alone knows its
 * policy's base_dirs, and answers REFUSED for any other base. Here: the
 * capabilities such a volume can have, the request naming it, its on-delete
 * mode, the intent detail that lets reconciliation find it again, and the
 * volume_context an operator sees.
 * Runs in rpcd, unprivileged; nothing here is fatal but allocation failure.
 */
#include "ctl_cs.h"
#include "mh_proto_all.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[] = {
    [MH_DIR_DELETE] = "delete",
    [MH_DIR_RETAIN] = "retain",
    [MH_DIR_ARCHIVE] = "archive",
};

bool ctl_volume_is_dir(const struct store_volume *v)
{
	return v && v->kind && strcmp(v->kind, STORE_KIND_DIRECTORY) == 0;
}

bool ctl_volume_is_shared(const struct store_volume *v)
{
	return ctl_volume_is_dir(v) && v->shared != STORE_SHARED_NO;
}

void ctl_dir_req(const struct store_volume *v, struct mh_req_dir *q)
{
	memset(q, 0, sizeof(*q));
	snprintf(q->volume_id, sizeof(q->volume_id), "%s", v->id);
	snprintf(q->base, sizeof(q->base), "%s", v->dir_base ? v->dir_base : "");
	snprintf(q->name, sizeof(q->name), "%s", v->dir_name ? v->dir_name : "");
}

int ctl_dir_publish(struct ctl *c, const struct store_volume *v, const char *target, bool readonly,
                    uint32_t gid, int mode, struct mh_err *e)
{
	struct mh_req_dir q;
	ctl_dir_req(v, &q);
	snprintf(q.path, sizeof(q.path), "%s", target);
	q.mode = readonly ? 1 : 0;
	if (gid) {
		q.flags = MH_F_MOUNT_GROUP;
		q.gid = gid;
	}
	/* On a shared base the helper keeps a single-node mode to one node (its records). */
	if (ctl_volume_is_shared(v) && !ctl_access_mode_multi_node(mode))
		q.flags |= MH_F_ONE_NODE;
	return mh_dir(c->mh, MH_REQ_DIR_PUBLISH, &q, NULL, e);
}

int ctl_dir_unpublish(struct ctl *c, const struct store_volume *v, const char *target,
                      struct mh_err *e)
{
	struct mh_req_dir q;
	ctl_dir_req(v, &q);
	snprintf(q.path, sizeof(q.path), "%s", target);
	return mh_dir(c->mh, MH_REQ_DIR_UNPUBLISH, &q, NULL, e);
}

int ctl_dir_check_capability(struct ctl_status *st, const Csi__V1__VolumeCapability *cap,
                             const char *field, bool shared)
{
	if (ctl_check_capability_modes(st, cap, field, shared))
		return st->code;
	if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "%s: directory volumes are mount volumes (no block access)", field);
	if (*ctl_cap_fs_type(cap))
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "%s.mount.fs_type must be empty: a directory volume is a directory "
		                "on its base's file system",
		                field);
	if (cap->mount && cap->mount->n_mount_flags)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "%s.mount.mount_flags must be empty: a directory volume is a bind "
		                "mount, which takes none",
		                field);
	return CTL_OK;
}

const char *ctl_dir_mode_name(uint8_t mode)
{
	return mode < sizeof(mode_names) / sizeof(mode_names[0]) ? mode_names[mode] : "delete";
}

bool ctl_dir_mode_parse(const char *name, uint8_t *mode)
{
	for (size_t m = 0; name && m < sizeof(mode_names) / sizeof(mode_names[0]); m++) {
		if (strcmp(name, mode_names[m]) == 0) {
			*mode = (uint8_t)m;
			return true;
		}
	}
	return false;
}

char *ctl_dir_detail(const char *base, const char *name, const char *key, const char *value)
{
	char *d = ctl_canon_set("", "kind", STORE_KIND_DIRECTORY), *next;
	const char *const kv[][2] = {{"base", base}, {"name", name}, {key, value}};
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
		if (!kv[i][0] || !kv[i][1] || !*kv[i][1])
			continue;
		next = ctl_canon_set(d, kv[i][0], kv[i][1]);
		free(d);
		d = next;
	}
	return d;
}

bool ctl_dir_detail_get(const char *detail, struct mh_req_dir *q)
{
	char kind[16];
	if (!ctl_canon_get(detail, "kind", kind, sizeof(kind)) ||
	    strcmp(kind, STORE_KIND_DIRECTORY) != 0)
		return false;
	if (!ctl_canon_get(detail, "base", q->base, sizeof(q->base)))
		q->base[0] = '\0';
	if (!ctl_canon_get(detail, "name", q->name, sizeof(q->name)))
		q->name[0] = '\0';
	return true;
}

/* One entry of a Volume's volume_context, from a. */
static Csi__V1__Volume__VolumeContextEntry *context_entry(struct ctl_arena *a, const char *key,
                                                          const char *value)
{
	Csi__V1__Volume__VolumeContextEntry *e = ctl_alloc(a, sizeof(*e));
	csi__v1__volume__volume_context_entry__init(e);
	e->key = ctl_strdup(a, key);
	e->value = ctl_strdup(a, value);
	return e;
}

void ctl_dir_context(struct ctl_arena *a, const struct store_volume *v, Csi__V1__Volume *vol)
{
	char dir[MH_PATH_MAX + MH_DIRNAME_MAX + 2];
	snprintf(dir, sizeof(dir), "%s/%s", v->dir_base, v->dir_name);
	const char *const kv[][2] = {
	    {CTL_P_TYPE, STORE_KIND_DIRECTORY},
	    {"directory", dir},
	    /* Whether the capacity is a project quota's hard limit or only a promise. */
	    {"capacity", v->quota ? "quota" : "advisory"},
	    {CTL_P_ON_DELETE, v->on_delete},
	    /* On a shared base: what another node's NodeStage and NodePublish find it by. */
	    {CTL_CTX_SHARED, "true"},
	    {CTL_P_BASE_DIR, v->dir_base},
	};
	vol->n_volume_context = sizeof(kv) / sizeof(kv[0]) - (ctl_volume_is_shared(v) ? 0 : 2);
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
	vol->volume_context = ctl_alloc(a, vol->n_volume_context * sizeof(*vol->volume_context));
	for (size_t i = 0; i < vol->n_volume_context; i++)
		vol->volume_context[i] = context_entry(a, kv[i][0], kv[i][1]);
}

static const char *kv_get(const struct ctl_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			return kv[i].value;
	return NULL;
}

/*
 * A volume this node's store does not know, which the volume_context says is
 * a directory volume on a shared base: asked of the helper (its policy must
 * say the base is shared, and the directory beneath it must carry this
 * volume's mark, DIR_STATS), then recorded as adopted. The context only says
 * where to look: nothing in it is taken for proof.
 */
int ctl_dir_adopt(struct ctl *c, struct ctl_status *st, const char *volume_id,
                  const struct ctl_kv *ctx, size_t n)
{
	struct store_volume *known = NULL;
	const char *type = kv_get(ctx, n, CTL_P_TYPE), *shared = kv_get(ctx, n, CTL_CTX_SHARED);
	const char *base = kv_get(ctx, n, CTL_P_BASE_DIR), *dir = kv_get(ctx, n, "directory");
	const char *od = kv_get(ctx, n, CTL_P_ON_DELETE);
	if (!volume_id || !pol_volume_id_valid(volume_id) || !type ||
	    strcmp(type, STORE_KIND_DIRECTORY) != 0 || !shared || strcmp(shared, "true") != 0)
		return CTL_OK; /* not one to adopt: the lookup that follows decides */
	int rc = store_volume_get(c->st, volume_id, &known);
	store_volume_free(known);
	if (rc == STORE_OK)
		return CTL_OK;
	if (rc != STORE_NOTFOUND)
		return ctl_fail_store(st, "look up volume", rc);
	size_t bl = base ? strlen(base) : 0;
	uint8_t mode;
	struct mh_req_dir q = {0};
	if (!base || !dir || bl == 0 || bl >= sizeof(q.base) || strncmp(dir, base, bl) != 0 ||
	    dir[bl] != '/' || strlen(dir + bl + 1) >= sizeof(q.name) ||
	    (od && !ctl_dir_mode_parse(od, &mode)))
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "volume_context: a shared directory volume needs " CTL_P_BASE_DIR
		                " and a directory beneath it");
	snprintf(q.volume_id, sizeof(q.volume_id), "%s", volume_id);
	snprintf(q.base, sizeof(q.base), "%s", base);
	snprintf(q.name, sizeof(q.name), "%s", dir + bl + 1);
	uint64_t avail;
	bool is_shared = false;
	struct mh_msg ans;
	struct mh_err e;
	if (ctl_data_available(c, st, base, &avail, NULL, &is_shared) &&
	    st->code != CTL_INVALID_ARGUMENT) /* the helper's REFUSED: no base of its policy */
		return st->code;
	if (!is_shared)
		return ctl_fail(st, CTL_NOT_FOUND,
		                "volume %s does not exist here: base directory %s is not shared "
		                "on this node (" CTL_P_BASE_DIR
		                " in the policy's shared_base_dirs)",
		                volume_id, base);
	if (mh_dir(c->mh, MH_REQ_DIR_STATS, &q, &ans, &e) != 0)
		return ctl_fail(st, e.kind == MH_E_UNAVAILABLE ? CTL_UNAVAILABLE : CTL_NOT_FOUND,
		                "volume %s does not exist in %s: %s", volume_id, dir, e.reason);
	char name[MH_ID_MAX + 16];
	snprintf(name, sizeof(name), "shared:%s", volume_id);
	struct store_volume v = {
	    .id = (char *)volume_id,
	    .name = name,
	    .fs_type = "",
	    .parameters = "",
	    .content_source = "",
	    .created_unix_ns = ctl_now_unix_ns(),
	    .kind = STORE_KIND_DIRECTORY,
	    .dir_base = q.base,
	    .dir_name = q.name,
	    .on_delete = od ? (char *)od : "delete",
	    .shared = STORE_SHARED_ADOPTED,
	};
	rc = store_volume_put(c->st, &v);
	return rc == STORE_OK || rc == STORE_EXISTS ? CTL_OK
	                                            : ctl_fail_store(st, "record volume", rc);
}

void ctl_dir_forget(struct ctl *c, const struct store_volume *v)
{
	struct store_staging *s = NULL;
	size_t pubs = 1;
	if (!v || v->shared != STORE_SHARED_ADOPTED ||
	    store_publication_count(c->st, v->id, &pubs) != STORE_OK || pubs)
		return;
	if (store_staging_get(c->st, v->id, &s) == STORE_NOTFOUND)
		(void)store_volume_delete(c->st, v->id);
	store_staging_free(s);
}
