/* Internals shared by the controller's source files; not used outside controller/. */
#ifndef SEPCSI_CTL_INT_H
#define SEPCSI_CTL_INT_H

#include "ctl.h"
#include "mh_client.h"
#include "store.h"

struct ctl {
	struct ctl_config cfg; /* strings owned */
	struct store *st;
	struct mh_client *mh;
	struct ctl_locks *locks;
};

/*
 * Per-key serialisation: at most one operation in flight per volume id (and
 * per CreateVolume name). ctl_lock returns false if the key is busy, and the
 * caller answers ABORTED as the spec asks.
 */
struct ctl_locks *ctl_locks_new(void);
void ctl_locks_free(struct ctl_locks *l);
bool ctl_lock(struct ctl *c, const char *key);
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
/* True for the access modes that only read. */
bool ctl_mode_readonly(const Csi__V1__VolumeCapability *cap);
/* The fs type a capability asks for ("" if none or block). */
const char *ctl_cap_fs_type(const Csi__V1__VolumeCapability *cap);
/* Mount flags of a capability joined with ',' into out; CTL_OK or INVALID_ARGUMENT. */
int ctl_cap_mount_flags(struct ctl_status *st, const Csi__V1__VolumeCapability *cap, char *out,
                        size_t outsz);

/* Volume ids as the helper accepts them: "sv-" + 32 lowercase hex digits. */
bool ctl_volume_id_valid(const char *id);
void ctl_new_volume_id(char out[36]);

/* The topology segment of this node, allocated from a. */
Csi__V1__Topology *ctl_node_topology(struct ctl *c, struct ctl_arena *a);

#endif
