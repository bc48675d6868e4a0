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

void ctl_dir_req(const struct store_volume *v, struct mh_req_dir *q)
{
	memset(q, 0, sizeof(*q));
	snprintf(q->volume_id, sizeof(q->volume_id), "%s", v->id);
	snprintf(q->base, sizeof(q->base), "%s", v->dir_base ? v->dir_base : "");
	snprintf(q->name, sizeof(q->name), "%s", v->dir_name ? v->dir_name : "");
}

int ctl_dir_publish(struct ctl *c, const struct store_volume *v, const char *target, bool readonly,
                    uint32_t gid, struct mh_err *e)
{
	struct mh_req_dir q;
	ctl_dir_req(v, &q);
	snprintf(q.path, sizeof(q.path), "%s", target);
	q.mode = readonly ? 1 : 0;
	if (gid) {
		q.flags = MH_F_MOUNT_GROUP;
		q.gid = gid;
	}
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
                             const char *field)
{
	if (ctl_check_capability(st, cap, field))
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
	if (cap->access_mode->mode ==
	    CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "%s.access_mode SINGLE_NODE_MULTI_WRITER is not supported for "
		                "directory volumes: the base directory is local to this node, and "
		                "one writer or readers only is what they offer",
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
	};
	vol->n_volume_context = sizeof(kv) / sizeof(kv[0]);
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
	vol->volume_context = ctl_alloc(a, vol->n_volume_context * sizeof(*vol->volume_context));
	for (size_t i = 0; i < vol->n_volume_context; i++)
		vol->volume_context[i] = context_entry(a, kv[i][0], kv[i][1]);
}
