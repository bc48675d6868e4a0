/* Internals shared by the controller's source files; not used outside controller/. */
#ifndef SEPCSI_CTL_INT_H
#define SEPCSI_CTL_INT_H

#include "ctl.h"
#include "mh_client.h"
#include "policy.h"
#include "units.h"
#include "store.h"

struct ctl {
	struct ctl_config cfg; /* strings owned */
	struct store *st;
	struct mh_client *mh;
	struct ctl_locks *locks;
	/* What the last reconciliation found and kept: images, snapshots (ctl_reconcile.c). */
	_Atomic unsigned unrecorded[2];
};

/*
 * Per-key serialisation: at most one operation in flight per volume id (and
 * per CreateVolume name). ctl_lock returns false if a request holds the key,
 * and the caller answers ABORTED as the spec asks; it waits a while (a
 * second) for a key reconciliation holds. ctl_lock_background
 * (reconciliation's) never waits: false if anyone holds the key.
 */
struct ctl_locks *ctl_locks_new(void);
void ctl_locks_free(struct ctl_locks *l);
bool ctl_lock(struct ctl *c, const char *key);
bool ctl_lock_background(struct ctl *c, const char *key);
void ctl_unlock(struct ctl *c, const char *key);

/* Map a helper failure to a status, prefixing context ("stage: ..."). */
int ctl_fail_mh(struct ctl_status *st, const char *what, const struct mh_err *e);
/* Map a store failure (not OK/NOTFOUND) to INTERNAL with context. */
int ctl_fail_store(struct ctl_status *st, const char *what, int rc);

/* Argument checks, each returning CTL_OK or the spec's code with a message naming the field. */
int ctl_check_required(struct ctl_status *st, const char *value, const char *field);
int ctl_check_path(struct ctl_status *st, const char *path, const char *field);
int ctl_check_capability(struct ctl_status *st, const Csi__V1__VolumeCapability *cap,
                         const char *field);
/* The same; multi_node: multi-node access modes too (a directory volume on a shared base). */
int ctl_check_capability_modes(struct ctl_status *st, const Csi__V1__VolumeCapability *cap,
                               const char *field, bool multi_node);
/* True for the access modes that only read. */
bool ctl_mode_readonly(const Csi__V1__VolumeCapability *cap);
bool ctl_access_mode_readonly(int mode);   /* the same, for a recorded AccessMode.Mode */
bool ctl_access_mode_multi_node(int mode); /* MULTI_NODE_* */
/* The fs type a capability asks for ("" if none or block). */
const char *ctl_cap_fs_type(const Csi__V1__VolumeCapability *cap);
/* Mount flags of a capability joined with ',' into out; CTL_OK or INVALID_ARGUMENT. */
int ctl_cap_mount_flags(struct ctl_status *st, const Csi__V1__VolumeCapability *cap, char *out,
                        size_t outsz);

/* New ids, valid as policy/syntax.c says (pol_volume_id_valid, ...): the helper's rules. */
void ctl_new_volume_id(char out[36]);

/*
 * Ephemeral inline volumes carry the CO's own volume id, not ours. They are
 * recorded under the name CTL_EPHEMERAL_PREFIX + that id: the prefix starts
 * with a control character the spec bans from CreateVolume names, so no CO
 * name can ever collide with it.
 */
#define CTL_EPHEMERAL_PREFIX "\x01ephemeral:"
#define CTL_EPHEMERAL_KEY    "csi.storage.k8s.io/ephemeral"

/* Was v made for an ephemeral inline volume (NodePublishVolume), not by CreateVolume? */
bool ctl_volume_is_ephemeral(const struct store_volume *v);

/*
 * The volume a Controller request names by our id: STORE_OK with *v set, or
 * STORE_NOTFOUND for a malformed id, no such volume, or an ephemeral inline
 * volume (the Node service's alone: the CO never created it, and a record the
 * Controller service added to it would outlive its NodeUnpublishVolume) or a
 * shared base's volume this node adopted (the Node service's alone here: the
 * controller that made it deletes, grows and copies it), or the store's error.
 */
int ctl_volume_get(struct ctl *c, const char *id, struct store_volume **v);

/*
 * Find the volume a Node request names: one of our ids, or the CO's id of an
 * ephemeral volume. CTL_OK with *v set, or NOT_FOUND / INTERNAL.
 */
int ctl_volume_resolve(struct ctl *c, struct ctl_status *st, const char *volume_id,
                       struct store_volume **v);

/* Ephemeral inline volumes (ctl_ephemeral.c). */
bool ctl_is_ephemeral(const Csi__V1__NodePublishVolumeRequest *req);
int ctl_ephemeral_publish(struct ctl *c, const Csi__V1__NodePublishVolumeRequest *req,
                          struct ctl_status *st);
int ctl_ephemeral_unpublish(struct ctl *c, const struct store_volume *v, const char *target,
                            struct ctl_status *st);

/*
 * Fill what a stage request needs beyond the capability from what CreateVolume
 * recorded on the volume (mkfs options; nouuid for xfs copies).
 */
void ctl_volume_mount_extras(const struct store_volume *v, struct mh_req_stage *ms);

/*
 * Directory volumes (ctl_dir.c): a directory beneath a base directory, made
 * and bound by the helper's DIR_* requests, instead of an image.
 */
bool ctl_volume_is_dir(const struct store_volume *v);
/* A directory volume on a base every node shares (store_volume.shared). */
bool ctl_volume_is_shared(const struct store_volume *v);
/* *q zeroed, then v's id, base directory and name: what every DIR_* request about v names. */
void ctl_dir_req(const struct store_volume *v, struct mh_req_dir *q);
/*
 * Bind v's directory onto target (DIR_PUBLISH: read-only if asked; gid, if
 * not 0, is the volume_mount_group), and undo that (DIR_UNPUBLISH). 0, or
 * -1 with *e set.
 */
int ctl_dir_publish(struct ctl *c, const struct store_volume *v, const char *target, bool readonly,
                    uint32_t gid, int mode, struct mh_err *e);
int ctl_dir_unpublish(struct ctl *c, const struct store_volume *v, const char *target,
                      struct mh_err *e);
/*
 * A capability a directory volume can have: well formed, mount access, no
 * fs_type, no mount flags (a bind takes none); a single-node access mode,
 * or on a shared base (shared) any. CTL_OK or INVALID_ARGUMENT naming field.
 */
int ctl_dir_check_capability(struct ctl_status *st, const Csi__V1__VolumeCapability *cap,
                             const char *field, bool shared);

/* The topology segment of this node, allocated from a. */
Csi__V1__Topology *ctl_node_topology(struct ctl *c, struct ctl_arena *a);

/*
 * ---- Shared by the Controller and GroupController services ----
 * (ctl_controller.c, ctl_delete.c, ctl_publish.c, ctl_volume.c, ctl_list.c,
 * ctl_snapshot.c, ctl_group.c; their own internals are in ctl_cs.h).
 */

/* New snapshot ids ("ss-" + 32 lowercase hex digits) and group ids ("gs-" + 32). */
void ctl_new_snapshot_id(char out[36]);
void ctl_new_group_id(char out[36]);

/*
 * A CO-chosen name (CreateVolume, CreateSnapshot, CreateVolumeGroupSnapshot):
 * required, at most 128 bytes, none of the control characters the spec bans.
 */
int ctl_check_name(struct ctl_status *st, const char *name, const char *field);

/*
 * Take every key or none: true with all n held, or false with none held and
 * *busy (if not NULL) naming the key that was in use. Keys may repeat.
 */
bool ctl_lock_keys(struct ctl *c, const char *const *keys, size_t n, const char **busy);
bool ctl_lock_keys_background(struct ctl *c, const char *const *keys, size_t n);
void ctl_unlock_keys(struct ctl *c, const char *const *keys, size_t n);

/* Wall-clock time as Unix nanoseconds, and as a protobuf Timestamp from a. */
int64_t ctl_now_unix_ns(void);
Google__Protobuf__Timestamp *ctl_timestamp(struct ctl_arena *a, int64_t unix_ns);

#endif
