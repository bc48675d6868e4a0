/*
 * The policy file loader (pol_load_buffer, the one path pol_load takes after
 * reading the file). The helper loads the file as root before it confines
 * itself; whoever can edit the file can only make it stricter or break the
 * start, so the loader must hold whatever the file holds. The input is the
 * file. Checks:
 *  - a refusal sets no policy and says why, naming the file;
 *  - an accepted policy keeps the loader's promises: every root a canonical
 *    absolute path other than "/", path patterns relative with no "." or ".."
 *    component, file system types among ext4, xfs and btrfs, every list
 *    within its bounds, 4096 <= min_bytes <= max_bytes <= 2^62, the ratio and
 *    freeze bound in range;
 *  - the accepted policy written back as a policy file (one entry per line)
 *    loads again to exactly the same policy: nothing the loader keeps depends
 *    on how the file spelled it.
 */
#include <string.h>

#include "fuzz.h"
#include "policy_all.h"

#define NAME "fuzz.ini"

static const char *const fstypes[] = {"ext4", "xfs", "btrfs"};

#define NLISTS 8

/*
 * The i-th entry of list k of p: 0 roots, 1 types, 2 mount options, 3..5
 * mkfs options, 6 staging patterns, 7 target patterns.
 */
static const char *entry(const struct pol *p, int k, size_t i)
{
	switch (k) {
	case 0:
		return pol_root(p, i);
	case 1:
		return pol_fstype(p, i);
	case 2:
		return pol_mount_option(p, i);
	case 6:
		return pol_path_pattern(p, POL_STAGING, i);
	case 7:
		return pol_path_pattern(p, POL_TARGET, i);
	default:
		return pol_mkfs_option(p, fstypes[k - 3], i);
	}
}

static const char *const keys[NLISTS] = {
    "[paths]\nallowed_roots",          "[filesystems]\ntypes",
    "[filesystems]\nmount_options",    "[filesystems]\nmkfs_options_ext4",
    "[filesystems]\nmkfs_options_xfs", "[filesystems]\nmkfs_options_btrfs",
    "[paths]\nstaging_paths",          "[paths]\ntarget_paths",
};

/* p as a policy file, or NULL if an entry is too long for one line. */
static char *write_policy(const struct pol *p)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		abort();
	bool fits = true;
	for (int k = 0; k < NLISTS; k++) {
		for (size_t i = 0; entry(p, k, i); i++) {
			fits = fits && strlen(entry(p, k, i)) < 150;
			fprintf(f, "%s = %s\n", keys[k], entry(p, k, i));
		}
	}
	unsigned pct = pol_overcommit_percent(p);
	fprintf(f,
	        "[volumes]\nmin_bytes = %llu\nmax_bytes = %llu\novercommit_ratio = %u.%02u\n"
	        "freeze_max_seconds = %u\n",
	        (unsigned long long)pol_min_volume_bytes(p),
	        (unsigned long long)pol_max_volume_bytes(p), pct / 100, pct % 100,
	        pol_freeze_max_seconds(p));
	fprintf(f, "[seccomp]\nlog_only = %s\n", pol_seccomp_log_only(p) ? "true" : "false");
	if (fclose(f) != 0) /* the text is complete only once the stream is closed */
		abort();
	if (!fits) {
		free(out);
		return NULL;
	}
	return out;
}

static void check_same(const struct pol *a, const struct pol *b)
{
	for (int k = 0; k < NLISTS; k++) {
		size_t i = 0;
		for (; entry(a, k, i); i++)
			FUZZ_CHECK(entry(b, k, i) && strcmp(entry(a, k, i), entry(b, k, i)) == 0);
		FUZZ_CHECK(entry(b, k, i) == NULL);
	}
	FUZZ_CHECK(pol_min_volume_bytes(a) == pol_min_volume_bytes(b));
	FUZZ_CHECK(pol_max_volume_bytes(a) == pol_max_volume_bytes(b));
	FUZZ_CHECK(pol_seccomp_log_only(a) == pol_seccomp_log_only(b));
	FUZZ_CHECK(pol_overcommit_percent(a) == pol_overcommit_percent(b));
	FUZZ_CHECK(pol_freeze_max_seconds(a) == pol_freeze_max_seconds(b));
}

static void check_promises(const struct pol *p)
{
	size_t n = 0;
	for (; pol_root(p, n); n++) {
		FUZZ_CHECK(pol_path_syntax_ok(pol_root(p, n)));
		FUZZ_CHECK(strcmp(pol_root(p, n), "/") != 0);
	}
	FUZZ_CHECK(n <= POL_ROOTS_MAX);
	for (n = 0; pol_fstype(p, n); n++) {
		const char *t = pol_fstype(p, n);
		FUZZ_CHECK(!strcmp(t, "ext4") || !strcmp(t, "xfs") || !strcmp(t, "btrfs"));
		FUZZ_CHECK(pol_fs_allowed(p, t));
	}
	FUZZ_CHECK(n <= POL_FSTYPES_MAX);
	for (n = 0; pol_mount_option(p, n); n++)
		FUZZ_CHECK(pol_mount_option(p, n)[0] != '\0');
	FUZZ_CHECK(n <= POL_OPTS_MAX);
	for (int k = 3; k < 6; k++)
		for (n = 0; entry(p, k, n); n++)
			FUZZ_CHECK(entry(p, k, n)[0] == '-' && !strchr(entry(p, k, n), ' '));
	uint64_t min = pol_min_volume_bytes(p), max = pol_max_volume_bytes(p);
	FUZZ_CHECK(min >= 4096 && min <= max && max <= (uint64_t)INT64_MAX / 2);
	FUZZ_CHECK(pol_overcommit_percent(p) >= 1 && pol_overcommit_percent(p) <= 10000);
	FUZZ_CHECK(pol_freeze_max_seconds(p) >= 1 && pol_freeze_max_seconds(p) <= 3600);
	/* A pattern never reaches outside: relative, no empty, "." or ".." component. */
	for (int k = 6; k < NLISTS; k++) {
		for (n = 0; entry(p, k, n); n++) {
			const char *c = entry(p, k, n);
			FUZZ_CHECK(c[0] != '/');
			for (;;) {
				size_t len = strcspn(c, "/");
				FUZZ_CHECK(len > 0 && !(len == 1 && c[0] == '.') &&
				           !(len == 2 && c[0] == '.' && c[1] == '.'));
				if (c[len] == '\0')
					break;
				c += len + 1;
			}
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pol *p = (struct pol *)1, *q = NULL;
	char err[256] = "";
	if (pol_load_buffer(NAME, (const char *)data, size, &p, err, sizeof(err)) < 0) {
		FUZZ_CHECK(p == NULL && strncmp(err, NAME ":", strlen(NAME ":")) == 0);
		return 0;
	}
	FUZZ_CHECK(p != NULL);
	check_promises(p);
	char *text = write_policy(p);
	if (text) {
		if (pol_load_buffer("again", text, strlen(text), &q, err, sizeof(err)) < 0) {
			fprintf(stderr, "%s\n--- written back as:\n%s", err, text);
			FUZZ_CHECK(!"the written-back policy loads");
		}
		check_same(p, q);
		pol_free(q);
		free(text);
	}
	pol_free(p);
	return 0;
}
