/*
 * A directory volume's name beneath its base directory, from the
 * StorageClass's pathPattern and the PVC/PV metadata external-provisioner
 * adds (--extra-create-metadata). A pure function (ctl_dirname.c): no store,
 * no helper, no allocation, so the unit test and the fuzz harness call it
 * exactly as CreateVolume does.
 */
#ifndef SEPCSI_CTL_DIRNAME_H
#define SEPCSI_CTL_DIRNAME_H

#include <stddef.h>

#include "mh_proto.h"

/* The metadata keys external-provisioner adds with --extra-create-metadata. */
#define CTL_META_PVC_NAMESPACE "csi.storage.k8s.io/pvc/namespace"
#define CTL_META_PVC_NAME      "csi.storage.k8s.io/pvc/name"
#define CTL_META_PV_NAME       "csi.storage.k8s.io/pv/name"

/* The pattern used when the StorageClass names none. */
#define CTL_DIR_DEFAULT_PATTERN "${.PVC.namespace}-${.PVC.name}-${.PV.name}"

/* The metadata a pattern may use; NULL or "" = not given. */
struct ctl_dir_meta {
	const char *pvc_namespace;
	const char *pvc_name;
	const char *pv_name;
};

/*
 * Builds the name into out from pattern (NULL: the default pattern; and when
 * the default pattern lacks metadata, the CSI request name instead). Each
 * substituted value has every byte outside [A-Za-z0-9._-] replaced by '-'
 * and a leading '.' by '_', so no value can add a '/' or a '..'; the
 * pattern's own text may hold only [A-Za-z0-9._-] and '/'. The result must
 * pass pol_dir_name_ok. Returns 0, or -1 with a reason (naming the variable,
 * the metadata key, or the name and what is wrong with it) in why.
 */
int ctl_dir_name(const char *pattern, const struct ctl_dir_meta *meta, const char *request_name,
                 char out[MH_DIRNAME_MAX + 1], char *why, size_t whysz);

#endif
