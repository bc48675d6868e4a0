/*
 * Mount options on their way to the kernel: the policy's check
 * (pol_mount_options_check) and the helper's split of the list into mount
 * attributes, superblock flags and file system options (mh_mount_opts_parse
 * in mounthelper/mh_mount.c). rpcd sends the list with STAGE; it comes from
 * a CSI VolumeCapability. Input: byte 0 bit 0 is the readonly flag, bit 1
 * picks a policy (the default one, or one that allows file system options
 * with values), the rest is the list. Checks:
 *  - the policy check answers 0, -EINVAL or -EPERM (with a reason); what it
 *    allows is made only of items on the policy's list ("name", or "name="
 *    for "name=value");
 *  - whatever the helper accepts keeps nosuid and nodev and never asks for an
 *    id-mapped mount; readonly means a read-only mount and superblock; a
 *    refusal is REFUSED with a reason and leaves no file system options
 *    allocated;
 *  - everything the policy allows, the helper can apply: a list that passes
 *    the policy is never refused by the helper after it (the policy is the
 *    one place that decides).
 */
#include <errno.h>
#include <string.h>
#include <sys/mount.h>

#include "fuzz.h"
#include "mh_mount.h"
#include "policy_all.h"

static struct pol *pols[2];

static const char fsopts[] = "[filesystems]\n"
                             "mount_options = ro rw noatime sync dirsync lazytime noexec\n"
                             "  data= commit= errors= nouuid inode64 user_xattr discard\n"
                             "  nobarrier compress= space_cache= logbsize= noquota\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];
	if (pol_load(NULL, &pols[0], err, sizeof(err)) < 0 ||
	    pol_load_buffer("fsopts", fsopts, sizeof(fsopts) - 1, &pols[1], err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		abort();
	}
	return 0;
}

/* Each comma-separated item, as "name" or "name=", is on the policy's list. */
static void check_items_listed(const struct pol *p, const char *list)
{
	char *copy = strdup(list), *save = NULL;
	if (!copy)
		abort();
	for (char *it = strtok_r(copy, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(it, '=');
		if (eq)
			eq[1] = '\0';
		bool listed = false;
		for (size_t j = 0; !listed && pol_mount_option(p, j); j++)
			listed = strcmp(it, pol_mount_option(p, j)) == 0;
		FUZZ_CHECK(listed);
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool readonly = data[0] & 1;
	const struct pol *p = pols[(data[0] >> 1) & 1];
	char *list = strndup((const char *)data + 1, size - 1), err[256] = "";
	if (!list)
		abort();

	int allowed = pol_mount_options_check(p, list, err, sizeof(err));
	FUZZ_CHECK(allowed == 0 || ((allowed == -EINVAL || allowed == -EPERM) && err[0]));
	if (allowed == 0)
		check_items_listed(p, list);

	struct mh_mount_opts o;
	struct mh_res r = {0};
	int rc = mh_mount_opts_parse(list, readonly, &o, &r);
	if (rc == 0) {
		const uint64_t forced = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
		FUZZ_CHECK((o.attr & forced) == forced && !(o.attr & MOUNT_ATTR_IDMAP));
		FUZZ_CHECK(!readonly || ((o.sb & POL_SB_RO) && (o.attr & MOUNT_ATTR_RDONLY)));
		FUZZ_CHECK(r.kind == MH_E_OK);
		mh_mount_opts_free(&o);
		FUZZ_CHECK(o.fs == NULL);
	} else {
		FUZZ_CHECK(rc == -1 && r.kind == MH_E_REFUSED && r.reason[0] && o.fs == NULL);
		FUZZ_CHECK(allowed != 0);
	}
	free(list);
	return 0;
}
