/*
 * Pieces the Controller and GroupController services share: map parameters
 * in canonical form, the driver's StorageClass parameters, what a set of
 * capabilities asks of a volume, and the Volume / Snapshot messages.
 * Runs in rpcd, unprivileged; nothing here is fatal but allocation failure.
 */
#include "ctl_cs.h"
#include "ctl_dirname.h"
#include "mh_proto_all.h"
#include "policy_all.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* File system minimums, measured with the mkfs tools of Debian 12 (docs/controller.md). */
#define MIN_EXT4_BYTES  (16 * CTL_MiB)
#define MIN_XFS_BYTES   (300 * CTL_MiB)
#define MIN_BTRFS_BYTES (109 * CTL_MiB)
#define MIN_BLOCK_BYTES (1 * CTL_MiB)

/* ---- maps ---- */

static const char *entry_string(const ProtobufCMessage *m, const char *name)
{
	const ProtobufCFieldDescriptor *f =
	    protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
	if (!f || f->type != PROTOBUF_C_TYPE_STRING)
		return "";
	const char *v = *(const char *const *)((const char *)m + f->offset);
	return v ? v : "";
}

struct ctl_kv *ctl_kv_from_map(struct ctl_arena *a, void *const *entries, size_t n)
{
	struct ctl_kv *kv = ctl_alloc(a, (n ? n : 1) * sizeof(*kv));
	for (size_t i = 0; i < n; i++) {
		kv[i].key = entry_string(entries[i], "key");
		kv[i].value = entry_string(entries[i], "value");
	}
	return kv;
}

static int cmp_kv(const void *x, const void *y)
{
	const struct ctl_kv *a = x, *b = y;
	return strcmp(a->key, b->key);
}

static bool is_k8s_key(const char *key)
{
	return strncmp(key, CTL_K8S_PARAM_PREFIX, strlen(CTL_K8S_PARAM_PREFIX)) == 0;
}

int ctl_kv_canon(struct ctl_status *st, const struct ctl_kv *kv, size_t n,
                 const char *const *allowed, const char *field, char **out)
{
	struct ctl_kv *sorted = calloc(n ? n : 1, sizeof(*sorted));
	size_t len = 1;
	char *s = NULL;

	*out = NULL;
	if (!sorted)
		abort();
	if (n)
		memcpy(sorted, kv, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_kv);
	for (size_t i = 0; i < n; i++) {
		if (i && strcmp(sorted[i].key, sorted[i - 1].key) == 0) {
			ctl_fail(st, CTL_INVALID_ARGUMENT, "%s: key '%.64s' is given twice", field,
			         sorted[i].key);
			goto out;
		}
		if (is_k8s_key(sorted[i].key))
			continue;
		bool known = false;
		for (const char *const *k = allowed; k && *k; k++)
			known = known || strcmp(*k, sorted[i].key) == 0;
		if (!known) {
			ctl_fail(st, CTL_INVALID_ARGUMENT, "%s: unknown key '%.64s'", field,
			         sorted[i].key);
			goto out;
		}
		for (const unsigned char *p = (const unsigned char *)sorted[i].value; *p; p++) {
			if (*p < 0x20 || *p == 0x7f) {
				ctl_fail(st, CTL_INVALID_ARGUMENT,
				         "%s: the value of '%s' contains a control character",
				         field, sorted[i].key);
				goto out;
			}
		}
		len += strlen(sorted[i].key) + strlen(sorted[i].value) + 2;
	}
	s = malloc(len);
	if (!s)
		abort();
	s[0] = '\0';
	for (size_t i = 0, o = 0; i < n; i++) {
		if (is_k8s_key(sorted[i].key))
			continue;
		o += (size_t)snprintf(s + o, len - o, "%s=%s\n", sorted[i].key, sorted[i].value);
	}
	*out = s;
	st->code = CTL_OK;
out:
	free(sorted);
	return st->code;
}

bool ctl_canon_get(const char *canon, const char *key, char *buf, size_t bufsz)
{
	size_t klen = strlen(key);
	for (const char *line = canon; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		if (len > klen && strncmp(line, key, klen) == 0 && line[klen] == '=') {
			size_t vlen = len - klen - 1;
			if (vlen >= bufsz)
				return false;
			memcpy(buf, line + klen + 1, vlen);
			buf[vlen] = '\0';
			return true;
		}
		line = nl ? nl + 1 : NULL;
	}
	return false;
}

/* Join sorted pairs as canonical text; malloc'd. */
static char *kv_join(struct ctl_kv *kv, size_t n)
{
	size_t len = 1;
	qsort(kv, n, sizeof(*kv), cmp_kv);
	for (size_t i = 0; i < n; i++)
		len += strlen(kv[i].key) + strlen(kv[i].value) + 2;
	char *s = malloc(len);
	if (!s)
		abort();
	s[0] = '\0';
	for (size_t i = 0, o = 0; i < n; i++)
		o += (size_t)snprintf(s + o, len - o, "%s=%s\n", kv[i].key, kv[i].value);
	return s;
}

char *ctl_canon_set(const char *canon, const char *key, const char *value)
{
	size_t lines = 0, m = 0;
	bool replaced = false;
	for (const char *p = canon; *p; p++)
		lines += *p == '\n';
	char *copy = strdup(canon);
	struct ctl_kv *kv = calloc(lines + 1, sizeof(*kv));
	if (!copy || !kv)
		abort();
	for (char *line = copy; *line;) {
		char *nl = strchr(line, '\n'), *eq;
		if (nl)
			*nl = '\0';
		if ((eq = strchr(line, '=')) != NULL) {
			*eq = '\0';
			kv[m].key = line;
			kv[m].value = eq + 1;
			if (strcmp(line, key) == 0) {
				kv[m].value = value;
				replaced = true;
			}
			m++;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	if (!replaced) {
		kv[m].key = key;
		kv[m].value = value;
		m++;
	}
	char *out = kv_join(kv, m);
	free(kv);
	free(copy);
	return out;
}

/* ---- parameters ---- */

int ctl_parse_expand_limit(struct ctl_status *st, const char *value, int64_t *out)
{
	int64_t n = 0;
	if (units_parse_size(value, &n) != 0 || n < 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                CTL_P_EXPAND_LIMIT
		                " '%.40s' is not a size (bytes, or with a "
		                "suffix Ki, Mi, Gi, Ti, k, M, G, T; 0 = no limit)",
		                value);
	*out = n;
	return CTL_OK;
}

/* mkfs options reach the helper, which checks them against its policy at stage time. */
static int check_mkfs_options(struct ctl_status *st, const char *v)
{
	if (strlen(v) > MH_OPTS_MAX)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                CTL_P_MKFS_OPTIONS " is longer than %d bytes", MH_OPTS_MAX);
	for (const char *p = v; *p; p++) {
		if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\'' || *p == '\\')
			return ctl_fail(st, CTL_INVALID_ARGUMENT,
			                CTL_P_MKFS_OPTIONS
			                " may hold printable ASCII without quotes "
			                "or backslashes only");
	}
	return CTL_OK;
}

/* Does a line of canonical text set key (whatever the length of its value)? */
static bool canon_has(const char *canon, const char *key)
{
	size_t klen = strlen(key);
	for (const char *line = canon; line && *line;) {
		if (strncmp(line, key, klen) == 0 && line[klen] == '=')
			return true;
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	return false;
}

/* The parameters of a directory volume (type: directory), or their absence for an image. */
static int parse_dir_params(struct ctl_status *st, struct ctl_vparams *out)
{
	static const char *const dir_only[] = {CTL_P_BASE_DIR, CTL_P_PATH_PATTERN, CTL_P_ON_DELETE,
	                                       CTL_P_ARCHIVE_ON_DELETE, NULL};
	static const char *const image_only[] = {CTL_P_FS_TYPE, CTL_P_MKFS_OPTIONS, NULL};
	char type[16] = STORE_KIND_IMAGE, buf[MH_PATH_MAX + 2], archive[8];

	if (ctl_canon_get(out->canon, CTL_P_TYPE, type, sizeof(type)) &&
	    strcmp(type, STORE_KIND_IMAGE) != 0 && strcmp(type, STORE_KIND_DIRECTORY) != 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "parameters: " CTL_P_TYPE " '%.40s' is not image or directory",
		                type);
	out->dir = strcmp(type, STORE_KIND_DIRECTORY) == 0;
	for (const char *const *k = out->dir ? image_only : dir_only; *k; k++) {
		if (canon_has(out->canon, *k)) {
			if (out->dir)
				return ctl_fail(
				    st, CTL_INVALID_ARGUMENT,
				    "parameters: %s does not apply to directory volumes "
				    "(" CTL_P_TYPE ": directory)",
				    *k);
			return ctl_fail(
			    st, CTL_INVALID_ARGUMENT,
			    "parameters: %s applies to directory volumes only (set " CTL_P_TYPE
			    ": directory)",
			    *k);
		}
	}
	if (!out->dir)
		return CTL_OK;
	if (!ctl_canon_get(out->canon, CTL_P_BASE_DIR, buf, sizeof(buf)))
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                canon_has(out->canon, CTL_P_BASE_DIR)
		                    ? "parameters: " CTL_P_BASE_DIR " is longer than a path may be"
		                    : "parameters: " CTL_P_BASE_DIR
		                      " is required for directory volumes (one of the helper's "
		                      "[directories] base_dirs)");
	if (!pol_path_syntax_ok(buf))
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "parameters: " CTL_P_BASE_DIR
		                " '%.200s' is not a canonical absolute path (no '.', '..', '//' "
		                "or trailing '/')",
		                buf);
	snprintf(out->base, sizeof(out->base), "%.*s", MH_PATH_MAX, buf);
	if (ctl_canon_get(out->canon, CTL_P_PATH_PATTERN, out->pattern, sizeof(out->pattern)))
		out->has_pattern = true;
	else if (canon_has(out->canon, CTL_P_PATH_PATTERN))
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "parameters: " CTL_P_PATH_PATTERN " is longer than %d bytes",
		                CTL_PATTERN_MAX);
	out->on_delete = MH_DIR_DELETE;
	bool has_mode = ctl_canon_get(out->canon, CTL_P_ON_DELETE, buf, sizeof(buf));
	if (has_mode && !ctl_dir_mode_parse(buf, &out->on_delete))
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "parameters: " CTL_P_ON_DELETE
		                " '%.40s' is not delete, retain or archive",
		                buf);
	if (ctl_canon_get(out->canon, CTL_P_ARCHIVE_ON_DELETE, archive, sizeof(archive))) {
		bool yes = strcmp(archive, "true") == 0;
		if (!yes && strcmp(archive, "false") != 0)
			return ctl_fail(st, CTL_INVALID_ARGUMENT,
			                "parameters: " CTL_P_ARCHIVE_ON_DELETE
			                " '%.8s' is not true or false",
			                archive);
		uint8_t mode = yes ? MH_DIR_ARCHIVE : MH_DIR_DELETE;
		if (has_mode && mode != out->on_delete)
			return ctl_fail(st, CTL_INVALID_ARGUMENT,
			                "parameters: " CTL_P_ARCHIVE_ON_DELETE
			                " %s (on delete: %s) conflicts with " CTL_P_ON_DELETE " %s",
			                archive, ctl_dir_mode_name(mode),
			                ctl_dir_mode_name(out->on_delete));
		out->on_delete = mode;
	} else if (canon_has(out->canon, CTL_P_ARCHIVE_ON_DELETE)) {
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "parameters: " CTL_P_ARCHIVE_ON_DELETE " is not true or false");
	}
	return CTL_OK;
}

int ctl_vparams_dir_name(struct ctl_status *st, const struct ctl_vparams *p,
                         const struct ctl_kv *params, size_t n, const char *request_name,
                         char out[MH_DIRNAME_MAX + 1])
{
	struct ctl_dir_meta m = {0};
	char why[CTL_MSG_MAX - 32];
	for (size_t i = 0; i < n; i++) {
		if (strcmp(params[i].key, CTL_META_PVC_NAMESPACE) == 0)
			m.pvc_namespace = params[i].value;
		else if (strcmp(params[i].key, CTL_META_PVC_NAME) == 0)
			m.pvc_name = params[i].value;
		else if (strcmp(params[i].key, CTL_META_PV_NAME) == 0)
			m.pv_name = params[i].value;
	}
	if (ctl_dir_name(p->has_pattern ? p->pattern : NULL, &m, request_name, out, why,
	                 sizeof(why)) != 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "parameters: %s", why);
	return st->code = CTL_OK;
}

int ctl_vparams_parse(struct ctl_status *st, const struct ctl_kv *params, size_t n,
                      const struct ctl_kv *mut, size_t nm, struct ctl_vparams *out)
{
	static const char *const known[] = {
	    CTL_P_FS_TYPE,   CTL_P_MKFS_OPTIONS,      CTL_P_EXPAND_LIMIT,
	    CTL_P_TYPE,      CTL_P_BASE_DIR,          CTL_P_PATH_PATTERN,
	    CTL_P_ON_DELETE, CTL_P_ARCHIVE_ON_DELETE, NULL};
	static const char *const mutable_known[] = {CTL_P_EXPAND_LIMIT, NULL};
	char buf[MH_OPTS_MAX + 1];

	memset(out, 0, sizeof(*out));
	if (ctl_kv_canon(st, params, n, known, "parameters", &out->canon) ||
	    ctl_kv_canon(st, mut, nm, mutable_known, "mutable_parameters", &out->mutable_canon) ||
	    parse_dir_params(st, out))
		goto fail;
	if (ctl_canon_get(out->canon, CTL_P_FS_TYPE, buf, sizeof(buf))) {
		if (!pol_fs_known(buf)) {
			ctl_fail(st, CTL_INVALID_ARGUMENT,
			         "parameters: " CTL_P_FS_TYPE " '%.40s' is not ext4, xfs or btrfs",
			         buf);
			goto fail;
		}
		snprintf(out->fs_type, sizeof(out->fs_type), "%.*s", MH_FSTYPE_MAX, buf);
	}
	/* NOLINTBEGIN(clang-analyzer-core.NonNullParamChecker): ctl_kv_canon() set canon */
	if (ctl_canon_get(out->canon, CTL_P_MKFS_OPTIONS, buf, sizeof(buf))) {
		if (check_mkfs_options(st, buf))
			goto fail;
		snprintf(out->mkfs_options, sizeof(out->mkfs_options), "%s", buf);
	} else if (strstr(out->canon, CTL_P_MKFS_OPTIONS "=")) {
		ctl_fail(st, CTL_INVALID_ARGUMENT, CTL_P_MKFS_OPTIONS " is too long");
		goto fail;
	}
	/* NOLINTEND(clang-analyzer-core.NonNullParamChecker) */
	/* mutable_parameters take precedence over parameters (spec, CreateVolume). */
	if ((ctl_canon_get(out->canon, CTL_P_EXPAND_LIMIT, buf, sizeof(buf)) &&
	     ctl_parse_expand_limit(st, buf, &out->expand_limit)) ||
	    (ctl_canon_get(out->mutable_canon, CTL_P_EXPAND_LIMIT, buf, sizeof(buf)) &&
	     ctl_parse_expand_limit(st, buf, &out->expand_limit)))
		goto fail;
	return st->code = CTL_OK;
fail:
	ctl_vparams_release(out);
	return st->code;
}

void ctl_vparams_release(struct ctl_vparams *p)
{
	free(p->canon);
	free(p->mutable_canon);
	p->canon = p->mutable_canon = NULL;
}

/* ---- capabilities ---- */

int ctl_cap_wellformed(struct ctl_status *st, const Csi__V1__VolumeCapability *cap,
                       const char *field)
{
	if (!cap)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "%s is required", field);
	if (!cap->access_mode ||
	    cap->access_mode->mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__UNKNOWN)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "%s.access_mode is required", field);
	if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT &&
	    cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "%s.access_type is required (mount or block)", field);
	return CTL_OK;
}

int ctl_caps_shape(struct ctl_status *st, Csi__V1__VolumeCapability *const *caps, size_t n,
                   const char *field, bool multi_node, struct ctl_shape *out)
{
	size_t blocks = 0;
	out->block = false;
	out->fs = "";
	if (n == 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "%s is required", field);
	for (size_t i = 0; i < n; i++) {
		if (ctl_check_capability_modes(st, caps[i], field, multi_node))
			return st->code;
		if (caps[i]->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK) {
			blocks++;
			continue;
		}
		const char *f = ctl_cap_fs_type(caps[i]);
		if (*out->fs && *f && strcmp(out->fs, f) != 0)
			return ctl_fail(st, CTL_INVALID_ARGUMENT,
			                "%s ask for two file systems (%s, %s)", field, out->fs, f);
		if (*f)
			out->fs = f;
	}
	if (blocks && blocks != n)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "%s mix block and mount access: a volume is either a raw block "
		                "device or a file system",
		                field);
	out->block = blocks == n;
	return CTL_OK;
}

bool ctl_cap_fits_volume(const Csi__V1__VolumeCapability *cap, const struct store_volume *v,
                         char *why, size_t whysz)
{
	struct ctl_status st = {0};
	if (ctl_volume_is_dir(v)
	        ? ctl_dir_check_capability(&st, cap, "volume_capability", ctl_volume_is_shared(v))
	        : ctl_check_capability(&st, cap, "volume_capability")) {
		snprintf(why, whysz, "%s", st.msg);
		return false;
	}
	if (ctl_volume_is_dir(v))
		return true;
	bool block = cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
	if (block && v->fs_type[0]) {
		snprintf(why, whysz, "volume %s holds file system %s, it is not a raw block device",
		         v->id, v->fs_type);
		return false;
	}
	if (!block && !v->fs_type[0]) {
		snprintf(why, whysz, "volume %s is a raw block volume and cannot be mounted",
		         v->id);
		return false;
	}
	const char *fs = ctl_cap_fs_type(cap);
	if (!block && *fs && strcmp(fs, v->fs_type) != 0) {
		snprintf(why, whysz, "volume %s holds %s, the capability asks for %s", v->id,
		         v->fs_type, fs);
		return false;
	}
	return true;
}

int64_t ctl_min_volume_bytes(const char *fs)
{
	if (!fs || !*fs)
		return MIN_BLOCK_BYTES;
	if (strcmp(fs, "xfs") == 0)
		return MIN_XFS_BYTES;
	if (strcmp(fs, "btrfs") == 0)
		return MIN_BTRFS_BYTES;
	return MIN_EXT4_BYTES;
}

/* ---- messages ---- */

Csi__V1__Volume *ctl_volume_msg(struct ctl *c, struct ctl_arena *a, const struct store_volume *v)
{
	Csi__V1__Volume *vol = ctl_alloc(a, sizeof(*vol));
	csi__v1__volume__init(vol);
	vol->capacity_bytes = v->capacity_bytes;
	vol->volume_id = ctl_strdup(a, v->id);
	/* On a shared base: none, which the spec reads as "every node alike". */
	if (!ctl_volume_is_shared(v)) {
		vol->n_accessible_topology = 1;
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
		vol->accessible_topology = ctl_alloc(a, sizeof(*vol->accessible_topology));
		vol->accessible_topology[0] = ctl_node_topology(c, a);
	}
	if (ctl_volume_is_dir(v))
		ctl_dir_context(a, v, vol);

	const char *src = v->content_source ? v->content_source : "";
	bool snap = strncmp(src, "snapshot:", 9) == 0, volsrc = strncmp(src, "volume:", 7) == 0;
	if (snap || volsrc) {
		Csi__V1__VolumeContentSource *cs = ctl_alloc(a, sizeof(*cs));
		csi__v1__volume_content_source__init(cs);
		if (snap) {
			Csi__V1__VolumeContentSource__SnapshotSource *s = ctl_alloc(a, sizeof(*s));
			csi__v1__volume_content_source__snapshot_source__init(s);
			s->snapshot_id = ctl_strdup(a, src + 9);
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
			cs->snapshot = s;
		} else {
			Csi__V1__VolumeContentSource__VolumeSource *s = ctl_alloc(a, sizeof(*s));
			csi__v1__volume_content_source__volume_source__init(s);
			s->volume_id = ctl_strdup(a, src + 7);
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
			cs->volume = s;
		}
		vol->content_source = cs;
	}
	return vol;
}

Csi__V1__Snapshot *ctl_snapshot_msg(struct ctl_arena *a, const struct store_snapshot *s)
{
	Csi__V1__Snapshot *m = ctl_alloc(a, sizeof(*m));
	csi__v1__snapshot__init(m);
	m->size_bytes = s->size_bytes;
	m->snapshot_id = ctl_strdup(a, s->id);
	m->source_volume_id = ctl_strdup(a, s->source_volume_id);
	m->creation_time = ctl_timestamp(a, s->created_unix_ns);
	/* A reflink or a copy is complete when the helper answers: no post-processing. */
	m->ready_to_use = true;
	m->group_snapshot_id = ctl_strdup(a, s->group_id ? s->group_id : "");
	return m;
}

Csi__V1__VolumeCondition *ctl_condition_msg(struct ctl_arena *a, const char *condition)
{
	Csi__V1__VolumeCondition *vc = ctl_alloc(a, sizeof(*vc));
	csi__v1__volume_condition__init(vc);
	vc->abnormal = condition && *condition;
	vc->message = ctl_strdup(a, vc->abnormal ? condition : "volume is healthy");
	return vc;
}

int ctl_published_nodes(struct ctl *c, struct ctl_status *st, const char *volume_id,
                        struct ctl_arena *a, char ***ids, size_t *n)
{
	struct store_attachment **l = NULL;
	size_t cnt = 0;
	int rc = store_attachment_list(c->st, volume_id, &l, &cnt);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "list attachments", rc);
	*ids = ctl_alloc(a, (cnt ? cnt : 1) * sizeof(**ids));
	for (size_t i = 0; i < cnt; i++)
		(*ids)[i] = ctl_strdup(a, l[i]->node_id);
	*n = cnt;
	store_attachment_list_free(l, cnt);
	return st->code = CTL_OK;
}

int ctl_data_available(struct ctl *c, struct ctl_status *st, const char *base, uint64_t *avail,
                       uint64_t *max, bool *shared)
{
	struct mh_ans_capacity cap;
	struct mh_err e;
	memset(&cap, 0, sizeof(cap));
	if (base) {
		struct mh_req_dir q = {0};
		struct mh_msg ans = {0};
		snprintf(q.base, sizeof(q.base), "%s", base);
		if (mh_dir(c->mh, MH_REQ_DIR_CAPACITY, &q, &ans, &e) != 0)
			return ctl_fail_mh(st, "capacity of the base directory", &e);
		cap = ans.u.capacity_ans;
	} else if (mh_capacity(c->mh, &cap, &e) != 0) {
		return ctl_fail_mh(st, "capacity of the data directory", &e);
	}
	*avail = cap.available_bytes;
	if (max)
		*max = cap.max_volume_bytes;
	if (shared)
		*shared = base && cap.shared;
	return st->code = CTL_OK;
}

int ctl_fail_busy(struct ctl_status *st, const char *busy_key)
{
	return ctl_fail(st, CTL_ABORTED, "an operation on %.160s is already in progress",
	                busy_key ? busy_key : "this object");
}
