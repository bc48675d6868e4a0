/*
 * The mkfs option check of the policy (pol_mkfs_options_check): rpcd sends the
 * helper a StorageClass's "mkfsOptions" string with STAGE, and the helper
 * passes to mkfs only what this check returns. Input: byte 0 picks the file
 * system, byte 1 the room given for the arguments (buffer bytes and argument
 * slots, both allocated to exactly that size so ASan sees any overflow), the
 * rest is the option string. Checked under the default policy and under one
 * that allows many more words:
 *  - a refusal is -EINVAL or -EPERM with a reason;
 *  - an acceptance returns at most the slots given, each argument a
 *    NUL-terminated word inside the buffer, starting with '-', with no space,
 *    quote or control byte, and equal to an entry of the policy's list for
 *    that file system: nothing else reaches mkfs's command line;
 *  - the accepted arguments, joined with spaces, are accepted again as the
 *    very same arguments (the normal form is stable).
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "mh_limits.h"
#include "policy_all.h"

static struct pol *pols[2];
static const char *const fstypes[] = {"ext4", "xfs", "btrfs", "", "vfat", "ext4 "};

/* Allows more words than the defaults, so that acceptance is easy to reach. */
static const char wide[] = "[filesystems]\n"
                           "mkfs_options_ext4 = -m0 -b4096 -Enodiscard -O^has_journal -Lx -i8192\n"
                           "  -Elazy_itable_init=1,lazy_journal_init=1 -N1000 -q -F\n"
                           "mkfs_options_xfs = -K -mreflink=0 -mreflink=1 -lsize=4m -f\n"
                           "mkfs_options_btrfs = -K -msingle -dsingle -f -Lx\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];
	if (pol_load(NULL, &pols[0], err, sizeof(err)) < 0 ||
	    pol_load_buffer("wide", wide, sizeof(wide) - 1, &pols[1], err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		abort();
	}
	return 0;
}

static void check(const struct pol *p, const char *fs, const char *list, size_t buflen, size_t max,
                  bool again)
{
	char *buf = malloc(buflen), **args = calloc(max ? max : 1, sizeof(char *));
	char err[256] = "";
	if (!buf || !args)
		abort();
	int n = pol_mkfs_options_check(p, fs, list, buf, buflen, args, max, err, sizeof(err));
	if (n < 0) {
		FUZZ_CHECK((n == -EINVAL || n == -EPERM) && err[0]);
		goto out;
	}
	FUZZ_CHECK((size_t)n <= max);
	size_t room = buflen + 1, used = 0;
	char *joined = calloc(1, room);
	if (!joined)
		abort();
	for (int i = 0; i < n; i++) {
		const char *a = args[i];
		FUZZ_CHECK(a >= buf && a < buf + buflen &&
		           memchr(a, '\0', (size_t)(buf + buflen - a)));
		FUZZ_CHECK(a[0] == '-' && strlen(a) >= 2);
		for (const char *c = a; *c; c++)
			FUZZ_CHECK((unsigned char)*c > 0x20 && *c != 0x7f && !strchr("\"'\\", *c));
		bool listed = false;
		for (size_t j = 0; !listed && pol_mkfs_option(p, fs, j); j++)
			listed = strcmp(a, pol_mkfs_option(p, fs, j)) == 0;
		FUZZ_CHECK(listed);
		/* The words and their separators fit: each word has its own NUL in buf. */
		int w = snprintf(joined + used, room - used, "%s%s", i ? " " : "", a);
		FUZZ_CHECK(w >= 0 && (size_t)w < room - used);
		used += (size_t)w;
	}
	if (again) {
		char *buf2 = malloc(buflen), *args2[POL_MKFS_ARGS_MAX];
		if (!buf2)
			abort();
		int n2 = pol_mkfs_options_check(p, fs, joined, buf2, buflen, args2,
		                                POL_MKFS_ARGS_MAX, err, sizeof(err));
		FUZZ_CHECK(n2 == n);
		for (int i = 0; i < n2; i++)
			FUZZ_CHECK(strcmp(args2[i], args[i]) == 0);
		free(buf2);
	}
	free(joined);
out:
	free(args);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	const char *fs = fstypes[data[0] % (sizeof(fstypes) / sizeof(fstypes[0]))];
	/* Room: from none at all to more than any list needs. */
	size_t buflen = 1 + (size_t)data[1] * 24, max = data[1] % (POL_MKFS_ARGS_MAX + 2);
	char *list = strndup((const char *)data + 2, size - 2);
	if (!list)
		abort();
	for (size_t i = 0; i < 2; i++) {
		check(pols[i], fs, list, buflen, max, false);
		check(pols[i], fs, list, MH_OPTS_MAX + POL_MKFS_ARGS_MAX + 1, POL_MKFS_ARGS_MAX,
		      true);
	}
	free(list);
	return 0;
}
