/*
 * The example policy that cmake --install ships (policy/policy.example.ini,
 * installed as share/doc/sepcsi/examples/policy.ini) loads, and to exactly
 * the helper's built-in defaults: every list entry in order, every bound.
 * So the example can never drift from the code. No privilege needed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "policy_all.h"
#include "tap.h"

typedef const char *(*nth_fn)(const struct pol *p, size_t i);

static void same_list(const char *what, const struct pol *a, const struct pol *b, nth_fn nth)
{
	size_t i = 0;
	for (;; i++) {
		const char *x = nth(a, i), *y = nth(b, i);
		if (!x && !y)
			break;
		bool same = x && y && strcmp(x, y) == 0;
		CHECK(same);
		if (!same) {
			fprintf(stderr, "  %s entry %zu: built in '%s', example '%s'\n", what, i,
			        x ? x : "(none)", y ? y : "(none)");
			return;
		}
	}
}

static const char *staging(const struct pol *p, size_t i)
{
	return pol_path_pattern(p, POL_STAGING, i);
}
static const char *target(const struct pol *p, size_t i)
{
	return pol_path_pattern(p, POL_TARGET, i);
}
static const char *mkfs_ext4(const struct pol *p, size_t i)
{
	return pol_mkfs_option(p, "ext4", i);
}
static const char *mkfs_xfs(const struct pol *p, size_t i)
{
	return pol_mkfs_option(p, "xfs", i);
}
static const char *mkfs_btrfs(const struct pol *p, size_t i)
{
	return pol_mkfs_option(p, "btrfs", i);
}

int main(void)
{
	struct pol *def = NULL, *ex = NULL;
	char err[512];

	CHECK(pol_load(NULL, &def, err, sizeof(err)) == 0);
	int rc = pol_load(SEPCSI_POLICY_EXAMPLE, &ex, err, sizeof(err));
	CHECK(rc == 0);
	if (rc != 0 || !def) {
		fprintf(stderr, "  %s\n", err);
		pol_free(def);
		return tap_done("test_policy_example");
	}
	same_list("allowed_roots", def, ex, pol_root);
	same_list("staging_paths", def, ex, staging);
	same_list("target_paths", def, ex, target);
	same_list("base_dirs", def, ex, pol_base_dir);
	same_list("types", def, ex, pol_fstype);
	same_list("mount_options", def, ex, pol_mount_option);
	same_list("mkfs_options_ext4", def, ex, mkfs_ext4);
	same_list("mkfs_options_xfs", def, ex, mkfs_xfs);
	same_list("mkfs_options_btrfs", def, ex, mkfs_btrfs);
	CHECK(pol_min_volume_bytes(def) == pol_min_volume_bytes(ex));
	CHECK(pol_max_volume_bytes(def) == pol_max_volume_bytes(ex));
	CHECK(pol_overcommit_percent(def) == pol_overcommit_percent(ex));
	CHECK(pol_freeze_max_seconds(def) == pol_freeze_max_seconds(ex));
	CHECK(pol_seccomp_log_only(def) == pol_seccomp_log_only(ex));
	pol_free(def);
	pol_free(ex);
	return tap_done("test_policy_example");
}
