/*
 * The privileged helper's side of its channel, past the codec: what it does
 * with a decoded datagram from rpcd before any privileged step.
 *
 *  - Dispatch: a type is served iff it is a request (odd, up to
 *    REQ_DIR_DELETE_SNAPSHOT); exactly PING, CAPACITY, STATS, LIST, DIR_STATS
 *    and DIR_CAPACITY are read-only, and they have no request keys (nor has
 *    a directory request that names no id, refused before it runs). Keys (mh_ops_keys) point at
 * NUL-terminated strings inside the request.
 *  - Re-validation under the default policy: a volume or snapshot id that
 *    passes has the fixed syntax; a path that passes is canonical and strictly
 *    beneath the root it matched; mount options the policy allows are ones the
 *    helper can apply (nosuid,nodev always set); mkfs options it allows are
 *    the policy's own words.
 *  - Refusal and audit: mh_ops_refuse answers any served request with an
 *    ANS_ERROR that encodes (the helper cannot answer what it cannot encode)
 *    and echoes the id, and writes one audit line, which sepcsictl's reader
 *    must parse back as one JSON object naming the request's id, operation,
 *    result and the very strings the request carried (a prefix of them when
 *    the record had to be cut). PING and CAPACITY are also answered for real
 *    (they only read: CAPACITY statvfs()es a scratch directory).
 * Nothing else of a handler runs: the rest mounts and attaches devices.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "fuzz.h"
#include "log.h"
#include "mh_helper_ops.h"
#include "mh_mount.h"
#include "mh_proto_all.h"
#include "policy_all.h"
#include "sctl_jsonline.h"

#define REASON "refused by the fuzz harness"

static struct pol *pol;
static struct mh_ctx ctx;
static int audit_rd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];
	int p[2];
	log_init("fuzz", LOG_FMT_TEXT, LOG_LVL_ERROR);
	if (pol_load(NULL, &pol, err, sizeof(err)) < 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		abort();
	/* The audit file is a pipe we read back; CAPACITY looks at /tmp. */
	ctx = (struct mh_ctx){.pol = pol,
	                      .data_fd = open("/tmp", O_RDONLY | O_DIRECTORY),
	                      .images_fd = -1,
	                      .snaps_fd = -1,
	                      .audit_fd = p[1]};
	if (ctx.data_fd < 0)
		abort();
	audit_rd = p[0];
	return 0;
}

static bool is_dir(uint16_t type)
{
	return (type >= MH_REQ_DIR_CREATE && type <= MH_REQ_DIR_DELETE_SNAPSHOT) ||
	       type == MH_REQ_DIR_NODE;
}

static bool is_hex_lower(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* The id syntax, written out again: prefix, then exactly 32 lowercase hex digits. */
static void check_id(const char *id, const char *prefix, bool valid)
{
	bool want = strlen(id) == 35 && strncmp(id, prefix, 3) == 0;
	for (size_t i = 3; want && i < 35; i++)
		want = is_hex_lower(id[i]);
	FUZZ_CHECK(valid == want);
}

/*
 * A path the policy accepts for either role: beneath its root, and made of
 * plain components only; accepted for both roles iff for one or the other.
 */
static void check_path(const char *path)
{
	const char *root = NULL;
	bool staging = pol_path_check(pol, path, POL_STAGING, NULL) == 0;
	bool target = pol_path_check(pol, path, POL_TARGET, NULL) == 0;
	if (pol_path_check(pol, path, POL_STAGING | POL_TARGET, &root) != 0) {
		FUZZ_CHECK(root == NULL && !staging && !target);
		return;
	}
	FUZZ_CHECK(staging || target);
	size_t rl = strlen(root), len = strlen(path);
	FUZZ_CHECK(len <= MH_PATH_MAX && strncmp(path, root, rl) == 0 && path[rl] == '/');
	FUZZ_CHECK(len > rl + 1);
	for (const char *c = path; *c;) {
		FUZZ_CHECK(*c == '/');
		const char *e = strchrnul(c + 1, '/');
		size_t n = (size_t)(e - c - 1);
		FUZZ_CHECK(n > 0 && n <= NAME_MAX);
		FUZZ_CHECK(!(n == 1 && c[1] == '.') && !(n == 2 && c[1] == '.' && c[2] == '.'));
		for (const char *s = c + 1; s < e; s++)
			FUZZ_CHECK((unsigned char)*s >= 0x20 && *s != 0x7f);
		c = e;
	}
}

/* A directory volume's name that passes: 1 to 4 plain components, none hidden or archived. */
static void check_dirname(const char *name)
{
	if (!pol_dir_name_ok(name))
		return;
	size_t depth = 0;
	for (const char *c = name;; c++) {
		const char *e = strchrnul(c, '/');
		FUZZ_CHECK(e > c && c[0] != '.' && strncmp(c, "archived-", 9) != 0);
		for (const char *x = c; x < e; x++)
			FUZZ_CHECK(
			    strchr(
			        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
			        *x) != NULL);
		FUZZ_CHECK(++depth <= 4);
		if (!*e)
			break;
		c = e;
	}
}

static void check_stage(const struct mh_req_stage *q)
{
	char why[200], buf[MH_OPTS_MAX + POL_MKFS_ARGS_MAX + 1];
	char *args[POL_MKFS_ARGS_MAX];
	if (pol_mount_options_check(pol, q->mount_flags, why, sizeof(why)) == 0) {
		struct mh_mount_opts o;
		struct mh_res r = {0};
		FUZZ_CHECK(mh_mount_opts_parse(q->mount_flags, q->readonly, &o, &r) == 0);
		FUZZ_CHECK((o.attr & (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) ==
		           (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
		FUZZ_CHECK(!q->readonly || (o.sb & POL_SB_RO));
		mh_mount_opts_free(&o);
	}
	int n = pol_mkfs_options_check(pol, q->fs_type, q->mkfs_options, buf, sizeof(buf), args,
	                               POL_MKFS_ARGS_MAX, why, sizeof(why));
	FUZZ_CHECK(n <= POL_MKFS_ARGS_MAX);
	for (int i = 0; i < n; i++) {
		bool listed = false;
		for (size_t j = 0; !listed && pol_mkfs_option(pol, q->fs_type, j); j++)
			listed = strcmp(args[i], pol_mkfs_option(pol, q->fs_type, j)) == 0;
		FUZZ_CHECK(listed);
	}
}

/*
 * What the handlers check first, before they touch anything: the ids and
 * paths a request acts on (its keys, plus the paths that are not keys), and
 * a STAGE's options.
 */
static void check_fields(const struct mh_msg *m, const char *const *keys, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		if (keys[k][0] == '/')
			check_path(keys[k]);
		check_id(keys[k], "sv-", pol_volume_id_valid(keys[k]));
		check_id(keys[k], "ss-", pol_snapshot_id_valid(keys[k]));
	}
	if (m->type == MH_REQ_STAGE)
		check_stage(&m->u.stage);
	if (m->type == MH_REQ_PUBLISH)
		check_path(m->u.publish.staging_path);
	if (m->type == MH_REQ_STATS)
		check_path(m->u.stats.path);
	if (is_dir(m->type)) {
		FUZZ_CHECK(!pol_base_dir_known(pol, m->u.dir.base)); /* none by default */
		check_dirname(m->u.dir.name);
		check_dirname(m->u.dir.source_name);
	}
}

/* The answer the helper would send: it must encode, and decode to itself. */
static void check_answer(const struct mh_msg *req, const struct mh_msg *ans)
{
	static uint8_t buf[MH_MSG_MAX];
	static struct mh_msg back;
	size_t len;
	FUZZ_CHECK(ans->id == req->id);
	FUZZ_CHECK(mh_msg_encode(ans, buf, sizeof(buf), &len) == 0);
	FUZZ_CHECK(mh_msg_decode(buf, len, &back) == 0 && back.type == ans->type);
}

/* Bytes s takes as a JSON string, quotes included, as the helper escapes it. */
static size_t json_len(const char *s)
{
	size_t n = 2;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		n += c < 0x20 || c == 0x7f ? 6 : c == '"' || c == '\\' ? 2 : 1;
	}
	return n;
}

/*
 * The record holds want whole when its JSON fits 1 KiB (common/log.c's
 * LOG_VALUE_MAX and the quotes), else a prefix of it followed by "...".
 */
static void check_value(const struct sctl_jsonline *l, const char *key, const char *want)
{
	const char *got = sctl_jsonline_get(l, key);
	if (!want || !*want)
		return;
	FUZZ_CHECK(got != NULL);
	if (json_len(want) <= 1024) {
		FUZZ_CHECK(strcmp(got, want) == 0);
		return;
	}
	size_t n = strlen(got);
	FUZZ_CHECK(n >= 3 && strcmp(got + n - 3, "...") == 0);
	FUZZ_CHECK(n - 3 < strlen(want) && strncmp(got, want, n - 3) == 0);
	FUZZ_CHECK(n - 3 >= 160); /* even all escapes, the cut keeps a useful prefix */
}

/*
 * The audit key under which the k-th of mh_ops_keys' keys is recorded (their
 * order: snapshot id, volume id, source id, path), whatever the key looks like.
 */
static const char *audit_key(const struct mh_msg *m, size_t k)
{
	if (is_dir(m->type)) { /* the ids given, in mh_ops_keys' order, then the path */
		const struct mh_req_dir *d = &m->u.dir;
		const char *names[4];
		size_t n = 0;
		if (d->snapshot_id[0])
			names[n++] = "snapshot_id";
		if (d->volume_id[0])
			names[n++] = "volume_id";
		if (d->source_id[0])
			names[n++] = "source_id";
		if (d->path[0])
			names[n++] = "path";
		return k < n ? names[k] : "";
	}
	switch (m->type) {
	case MH_REQ_SNAPSHOT:
		return k == 0 ? "snapshot_id" : "volume_id";
	case MH_REQ_GROUP_SNAPSHOT: /* the record names the first member only */
		return k == 0 ? "volume_id" : k == 1 ? "snapshot_id" : "-";
	case MH_REQ_DELETE_SNAPSHOT:
		return "snapshot_id";
	case MH_REQ_CLONE:
		return k == 0 ? "volume_id" : "source_id";
	case MH_REQ_CREATE:
	case MH_REQ_DELETE:
	case MH_REQ_RESIZE:
		return "volume_id";
	default: /* STAGE, UNSTAGE, PUBLISH, UNPUBLISH, EXPAND: the volume, then its path */
		return k == 0 ? "volume_id" : "path";
	}
}

/* Read back the one audit line the last call wrote and parse it as sepcsictl does. */
static void check_audit(const struct mh_msg *req, const char *result, const char *const *keys,
                        size_t nkeys)
{
	static char line[16384];
	ssize_t n = read(audit_rd, line, sizeof(line) - 1);
	FUZZ_CHECK(n > 0 && line[n - 1] == '\n');
	line[n - 1] = '\0';
	FUZZ_CHECK(memchr(line, '\n', (size_t)n - 1) == NULL); /* one record, one line */
	struct sctl_jsonline l;
	if (sctl_jsonline_parse(line, &l) != 0) {
		fprintf(stderr, "audit line (%zd bytes), its end: %s\n", n,
		        line + (n > 300 ? n - 300 : 0));
		FUZZ_CHECK(!"the audit line is one JSON object");
	}
	char id[16];
	snprintf(id, sizeof(id), "%u", req->id);
	FUZZ_CHECK(sctl_jsonline_get(&l, "req") && strcmp(sctl_jsonline_get(&l, "req"), id) == 0);
	FUZZ_CHECK(sctl_jsonline_get(&l, "result") &&
	           strcmp(sctl_jsonline_get(&l, "result"), result) == 0);
	const char *op = sctl_jsonline_get(&l, "op");
	FUZZ_CHECK(op && strcmp(op, mh_type_name(req->type) + 4) == 0); /* "REQ_X" -> "X" */
	/* mh_ops_refuse names every key of the request, under its role. */
	for (size_t k = 0; k < nkeys; k++)
		if (strcmp(audit_key(req, k), "-") != 0) /* "-": a key the record does not name */
			check_value(&l, audit_key(req, k), keys[k]);
	if (strcmp(result, "refused") == 0)
		check_value(&l, "reason", REASON);
	if (is_dir(req->type)) {
		check_value(&l, "base", req->u.dir.base);
		check_value(&l, "directory", req->u.dir.name);
	}
	sctl_jsonline_free(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mh_msg req, ans;
	if (mh_msg_decode(data, size, &req) < 0)
		return 0; /* the helper ends here (fuzz_mh_msg covers the codec) */

	bool is_request =
	    req.type % 2 == 1 &&
	    (req.type <= MH_REQ_DIR_DELETE_SNAPSHOT || req.type == MH_REQ_GROUP_SNAPSHOT ||
	     req.type == MH_REQ_BLOCKS || req.type == MH_REQ_DIR_NODE);
	bool read_only = req.type == MH_REQ_PING || req.type == MH_REQ_CAPACITY ||
	                 req.type == MH_REQ_STATS || req.type == MH_REQ_LIST ||
	                 req.type == MH_REQ_DIR_STATS || req.type == MH_REQ_DIR_CAPACITY ||
	                 req.type == MH_REQ_DIR_NODE;
	FUZZ_CHECK(mh_ops_known(req.type) == is_request);
	const struct mh_op_row *row = mh_ops_row(req.type);
	FUZZ_CHECK((row && row->read_only) == read_only);
	FUZZ_CHECK(!is_request || (row && strlen(row->safety) > 10)); /* each row argues */
	if (!is_request)
		return 0; /* a violation: the helper ends here too */

	const char *keys[MH_OPS_KEYS_MAX];
	size_t nkeys = mh_ops_keys(&req, keys);
	FUZZ_CHECK(nkeys <= MH_OPS_KEYS_MAX && (!read_only || nkeys == 0));
	/* BLOCKS reads images that never change: it holds no key, as the read-only ones. */
	FUZZ_CHECK(read_only || nkeys > 0 || is_dir(req.type) || req.type == MH_REQ_BLOCKS);
	for (size_t k = 0; k < nkeys; k++) {
		FUZZ_CHECK((const char *)keys[k] >= (const char *)&req &&
		           (const char *)keys[k] < (const char *)(&req + 1));
		FUZZ_CHECK(memchr(keys[k], '\0', (size_t)((const char *)(&req + 1) - keys[k])));
	}
	check_fields(&req, keys, nkeys);

	mh_ops_refuse(&ctx, &req, &ans, MH_E_REFUSED, EPERM, REASON);
	FUZZ_CHECK(ans.type == MH_ANS_ERROR && ans.u.error.kind == MH_E_REFUSED);
	check_answer(&req, &ans);
	if (req.type != MH_REQ_PING) /* the liveness probe is never written to the file */
		check_audit(&req, "refused", keys, nkeys);

	if (req.type == MH_REQ_PING || req.type == MH_REQ_CAPACITY) {
		FUZZ_CHECK(mh_ops_handle(&ctx, &req, &ans) == 0);
		FUZZ_CHECK(ans.type == req.type + 1);
		check_answer(&req, &ans);
		if (req.type == MH_REQ_CAPACITY)
			check_audit(&req, "ok", keys, 0);
	}
	return 0;
}
