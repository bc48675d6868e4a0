/*
 * Internals of the Controller and GroupController services, shared by
 * ctl_controller.c, ctl_delete.c, ctl_publish.c, ctl_volume.c, ctl_list.c,
 * ctl_snapshot.c and ctl_group.c (implemented in ctl_cs.c). Not used by the Node service.
 * Runs in rpcd, unprivileged.
 */
#ifndef SEPCSI_CTL_CS_H
#define SEPCSI_CTL_CS_H

#include "ctl_int.h"

#define CTL_MiB                  (1024LL * 1024)
#define CTL_GiB                  (1024 * CTL_MiB)
#define CTL_DEFAULT_VOLUME_BYTES (1 * CTL_GiB)
#define CTL_K8S_PARAM_PREFIX     "csi.storage.k8s.io/"

/* StorageClass parameters this driver knows (docs/controller.md). */
#define CTL_P_FS_TYPE      "fsType"
#define CTL_P_MKFS_OPTIONS "mkfsOptions"
#define CTL_P_EXPAND_LIMIT "expandLimitBytes" /* also a mutable parameter */
#define CTL_P_TYPE         "type"             /* "image" (default) or "directory" */
/* Directory volumes only: */
#define CTL_P_BASE_DIR          "baseDir"         /* required: one of the helper's base_dirs */
#define CTL_P_PATH_PATTERN      "pathPattern"     /* the name beneath it (ctl_dirname.h) */
#define CTL_CTX_SHARED          "shared"          /* volume_context: "true" on a shared base */
#define CTL_P_ON_DELETE         "onDelete"        /* delete (default), retain, archive */
#define CTL_P_ARCHIVE_ON_DELETE "archiveOnDelete" /* older spelling: true = archive */
#define CTL_PATTERN_MAX         1024
/* The smallest directory volume (its quota): 1 MiB, the unit sizes are rounded to. */
#define CTL_DIR_MIN_BYTES CTL_MiB

/* Lock keys for CO-chosen names; ids lock under themselves. */
#define CTL_KEY_VOLUME_NAME   "name:"
#define CTL_KEY_SNAPSHOT_NAME "snapshot-name:"
#define CTL_KEY_GROUP_NAME    "group-name:"

/* One entry of a request's map<string, string>, borrowed from the request. */
struct ctl_kv {
	const char *key;
	const char *value;
};

/*
 * The entries of a protobuf-c map field (an array of n map-entry messages) as
 * an array from a. Read through each message's descriptor, so it works for
 * every generated *Entry type.
 */
struct ctl_kv *ctl_kv_from_map(struct ctl_arena *a, void *const *entries, size_t n);
#define CTL_KV(a, msg, field) ctl_kv_from_map((a), (void *const *)(msg)->field, (msg)->n_##field)

/*
 * Canonical text of a map: "key=value\n" lines sorted by key, without the
 * keys the Kubernetes sidecars add (csi.storage.k8s.io/...). Every other key
 * must be in allowed (NULL-terminated), else INVALID_ARGUMENT naming field;
 * duplicate keys and control characters in values are refused too.
 * *out is malloc'd (the caller frees).
 */
int ctl_kv_canon(struct ctl_status *st, const struct ctl_kv *kv, size_t n,
                 const char *const *allowed, const char *field, char **out);
/* The value of key in canonical text, copied into buf; false if absent or too long. */
bool ctl_canon_get(const char *canon, const char *key, char *buf, size_t bufsz);
/* canon with key set to value (added or replaced, order kept canonical); malloc'd. */
char *ctl_canon_set(const char *canon, const char *key, const char *value);

/* CreateVolume parameters and mutable_parameters, checked. */
struct ctl_vparams {
	char fs_type[MH_FSTYPE_MAX + 1];    /* "fsType" or "" */
	char mkfs_options[MH_OPTS_MAX + 1]; /* "mkfsOptions" or "" */
	int64_t expand_limit; /* effective "expandLimitBytes" (mutable wins), 0 = none */
	char *canon;          /* parameters, canonical; malloc'd */
	char *mutable_canon;  /* mutable_parameters, canonical; malloc'd */
	/* type: directory, with its own parameters (the rest is left zero for images). */
	bool dir;
	char base[MH_PATH_MAX + 1];        /* "baseDir", a canonical absolute path */
	bool has_pattern;                  /* "pathPattern" given (else the default) */
	char pattern[CTL_PATTERN_MAX + 1]; /* "pathPattern" */
	uint8_t on_delete;                 /* MH_DIR_*, from "onDelete" / "archiveOnDelete" */
};
int ctl_vparams_parse(struct ctl_status *st, const struct ctl_kv *params, size_t n,
                      const struct ctl_kv *mut, size_t nm, struct ctl_vparams *out);
void ctl_vparams_release(struct ctl_vparams *p); /* frees the strings, not p */
/* An "expandLimitBytes" value: bytes, or 0 for "0" (no limit). CTL_OK or INVALID_ARGUMENT. */
int ctl_parse_expand_limit(struct ctl_status *st, const char *value, int64_t *out);

/*
 * A directory volume's name for a CreateVolume (ctl_dir_name with the
 * request's metadata parameters and name) into out. CTL_OK or
 * INVALID_ARGUMENT.
 */
int ctl_vparams_dir_name(struct ctl_status *st, const struct ctl_vparams *p,
                         const struct ctl_kv *params, size_t n, const char *request_name,
                         char out[MH_DIRNAME_MAX + 1]);

/* Directory volumes' on-delete modes by name ("delete", "retain", "archive"): MH_DIR_*. */
bool ctl_dir_mode_parse(const char *name, uint8_t *mode);
const char *ctl_dir_mode_name(uint8_t mode);
/*
 * The detail of an intent about a directory volume, so reconciliation can
 * name it to the helper: canonical "base=...\nkind=directory\nname=...\n",
 * plus key=value if key is not NULL (an empty name or value is left out).
 * malloc'd. ctl_dir_detail_get() reads base and name back into *q; false if
 * the detail is not a directory volume's (an image's intent).
 */
char *ctl_dir_detail(const char *base, const char *name, const char *key, const char *value);
bool ctl_dir_detail_get(const char *detail, struct mh_req_dir *q);
/* The volume_context of a directory volume (its directory, quota or advisory, on-delete). */
void ctl_dir_context(struct ctl_arena *a, const struct store_volume *v, Csi__V1__Volume *vol);

/* What a set of capabilities asks of a volume. */
struct ctl_shape {
	bool block;     /* every capability is raw block */
	const char *fs; /* mount: the file system named, "" if none named */
};
/*
 * Check every capability (ctl_check_capability) and that together they fit
 * one volume: all block or all mount, at most one file system named.
 * INVALID_ARGUMENT naming field otherwise; n == 0 is INVALID_ARGUMENT too.
 */
int ctl_caps_shape(struct ctl_status *st, Csi__V1__VolumeCapability *const *caps, size_t n,
                   const char *field, bool multi_node, struct ctl_shape *out);
/* Well formed: access mode and access type present. INVALID_ARGUMENT otherwise. */
int ctl_cap_wellformed(struct ctl_status *st, const Csi__V1__VolumeCapability *cap,
                       const char *field);
/*
 * Whether volume v can be used with cap: a single-node mode, block for a raw
 * volume, mount with no or the same fs type for a filesystem volume. On
 * false, why says so.
 */
bool ctl_cap_fits_volume(const Csi__V1__VolumeCapability *cap, const struct store_volume *v,
                         char *why, size_t whysz);
/* The smallest volume a file system can be made on ("" = raw block). */
int64_t ctl_min_volume_bytes(const char *fs);

/*
 * NodeStageVolume and NodePublishVolume of a volume this node does not know
 * whose volume_context (ctx) names a directory volume on a shared base: the
 * helper proves it, and it is recorded as adopted. CTL_OK also when there is
 * nothing to adopt (the lookup that follows answers NOT_FOUND).
 */
int ctl_dir_adopt(struct ctl *c, struct ctl_status *st, const char *volume_id,
                  const struct ctl_kv *ctx, size_t n);
/* An adopted volume with no staging and no publication left here is forgotten. */
void ctl_dir_forget(struct ctl *c, const struct store_volume *v);

/* Response pieces, allocated from a. */
Csi__V1__Volume *ctl_volume_msg(struct ctl *c, struct ctl_arena *a, const struct store_volume *v);
Csi__V1__Snapshot *ctl_snapshot_msg(struct ctl_arena *a, const struct store_snapshot *s);
Csi__V1__VolumeCondition *ctl_condition_msg(struct ctl_arena *a, const char *condition);
/* The nodes a volume is controller-published to, as an array from a. */
int ctl_published_nodes(struct ctl *c, struct ctl_status *st, const char *volume_id,
                        struct ctl_arena *a, char ***ids, size_t *n);

/*
 * What the helper's data directory (base NULL: CAPACITY) or a directory
 * volumes' base directory (DIR_CAPACITY) may still promise to new volumes,
 * and the largest volume it would create now (max, may be NULL), as the
 * helper counts them; with a base, whether the helper's policy says every
 * node shares it (shared, may be NULL). CTL_OK or the mapped error.
 */
int ctl_data_available(struct ctl *c, struct ctl_status *st, const char *base, uint64_t *avail,
                       uint64_t *max, bool *shared);

/*
 * Grow a volume to bytes: its image (RESIZE) or its directory's quota
 * (DIR_EXPAND). 0 with the size now in *real, or -1 with *e set.
 */
int ctl_volume_grow(struct ctl *c, const struct store_volume *v, uint64_t bytes, uint64_t *real,
                    struct mh_err *e);

/*
 * Remove a snapshot's copy: an image snapshot's (base NULL: DELETE_SNAPSHOT)
 * or a directory snapshot's in base (DIR_DELETE_SNAPSHOT). 0 or -1 with *e.
 */
int ctl_snapshot_remove(struct ctl *c, const char *id, const char *base, struct mh_err *e);

/* ABORTED for a key set that has an operation in flight. */
int ctl_fail_busy(struct ctl_status *st, const char *busy_key);

#endif
