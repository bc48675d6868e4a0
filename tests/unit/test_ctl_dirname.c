/*
 * Unit tests of ctl_dir_name (controller/ctl_dirname.c): a directory
 * volume's name from pathPattern and the PVC/PV metadata. Pure function: no
 * store, no helper.
 */
#include <stdio.h>
#include <string.h>

#include "ctl_dirname.h"
#include "policy_all.h"
#include "tap.h"

static char why[256];

/* The name built, or "ERR" (the reason is in why). */
static const char *build(const char *pattern, const char *ns, const char *pvc, const char *pv,
                         const char *request)
{
	static char out[MH_DIRNAME_MAX + 1];
	struct ctl_dir_meta m = {.pvc_namespace = ns, .pvc_name = pvc, .pv_name = pv};
	why[0] = '\0';
	if (ctl_dir_name(pattern, &m, request, out, why, sizeof(why)) != 0) {
		CHECK(out[0] == '\0' && why[0] != '\0');
		return "ERR";
	}
	CHECK(pol_dir_name_ok(out));
	return out;
}

static void test_default_pattern(void)
{
	/* With the metadata: namespace-claim-pv. */
	CHECK(strcmp(build(NULL, "team-a", "data", "pvc-123", "pvc-123"), "team-a-data-pvc-123") ==
	      0);
	/* Without it (csi-sanity, plain clients): the request's name, sanitised. */
	CHECK(strcmp(build(NULL, NULL, NULL, NULL, "sanity-vol 1"), "sanity-vol-1") == 0);
	CHECK(strcmp(build(NULL, "ns", "claim", NULL, "pv-x"), "pv-x") == 0);
	CHECK(strcmp(build(NULL, "", "", "", "a/b/../c"), "a-b-..-c") == 0);
	CHECK(strcmp(build(NULL, NULL, NULL, NULL, ".hidden"), "_hidden") == 0);
	/* A name that can only be an archive's is refused, as the helper would. */
	CHECK(strcmp(build(NULL, NULL, NULL, NULL, "archived-x"), "ERR") == 0);
	CHECK(strstr(why, "archived-") != NULL);
	CHECK(strcmp(build(NULL, NULL, NULL, NULL, ""), "ERR") == 0);
}

static void test_user_pattern(void)
{
	CHECK(strcmp(build("${.PVC.namespace}/${.PVC.name}", "ns", "claim", "pv", "r"),
	             "ns/claim") == 0);
	CHECK(strcmp(build("${pvc.metadata.namespace}/${pvc.metadata.name}-${pv.metadata.name}",
	                   "ns", "claim", "pv", "r"),
	             "ns/claim-pv") == 0);
	CHECK(strcmp(build("vols/${.PV.name}", "ns", "c", "pv-1", "r"), "vols/pv-1") == 0);
	CHECK(strcmp(build("fixed", NULL, NULL, NULL, "r"), "fixed") == 0);
	/* Values never add a separator or a dot-component. */
	CHECK(strcmp(build("${.PVC.namespace}/${.PVC.name}", "..", "../../etc", "pv", "r"),
	             "_./_.-..-etc") == 0);
	CHECK(strcmp(build("${.PVC.name}", NULL, "a/b", NULL, "r"), "a-b") == 0);
	CHECK(strcmp(build("${.PVC.name}", NULL, "caf\xc3\xa9", NULL, "r"), "caf--") == 0);
	/* Metadata the pattern needs is missing: named, with the provisioner flag. */
	CHECK(strcmp(build("${.PVC.namespace}/x", NULL, "c", "pv", "r"), "ERR") == 0);
	CHECK(strstr(why, "csi.storage.k8s.io/pvc/namespace") &&
	      strstr(why, "--extra-create-metadata"));
	CHECK(strcmp(build("${.PV.name}", "ns", "c", "", "r"), "ERR") == 0);
	CHECK(strstr(why, "csi.storage.k8s.io/pv/name") != NULL);
	/* Unknown or unterminated variables, and literal text outside the set. */
	CHECK(strcmp(build("${.PVC.uid}", "ns", "c", "pv", "r"), "ERR") == 0);
	CHECK(strstr(why, "unknown variable") != NULL);
	CHECK(strcmp(build("${.PVC.name", "ns", "c", "pv", "r"), "ERR") == 0);
	CHECK(strcmp(build("$HOME/x", "ns", "c", "pv", "r"), "ERR") == 0);
	CHECK(strcmp(build("a b", "ns", "c", "pv", "r"), "ERR") == 0);
	CHECK(strcmp(build("a}b", "ns", "c", "pv", "r"), "ERR") == 0);
	/* The result must be a name the helper takes. */
	CHECK(strcmp(build("/abs/${.PV.name}", "ns", "c", "pv", "r"), "ERR") == 0);
	CHECK(strcmp(build("a//${.PV.name}", "ns", "c", "pv", "r"), "ERR") == 0);
	CHECK(strcmp(build("../${.PV.name}", "ns", "c", "pv", "r"), "ERR") == 0);
	CHECK(strcmp(build("a/b/c/d/${.PV.name}", "ns", "c", "pv", "r"), "ERR") == 0);
	CHECK(strcmp(build("archived-${.PV.name}", "ns", "c", "pv", "r"), "ERR") == 0);
	CHECK(strcmp(build("${.PV.name}/", "ns", "c", "pv", "r"), "ERR") == 0);
	CHECK(strcmp(build("", "ns", "c", "pv", "r"), "ERR") == 0);
}

static void test_lengths(void)
{
	char big[300];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK(strcmp(build("${.PVC.name}", "ns", big, "pv", "r"), "ERR") == 0);
	CHECK(strstr(why, "longer than 255") != NULL);
	CHECK(strcmp(build(big, "ns", "c", "pv", "r"), "ERR") == 0);
	CHECK(strcmp(build(NULL, NULL, NULL, NULL, big), "ERR") == 0);
	/* A component longer than NAME_MAX is refused even when the whole fits. */
	big[255] = '\0';
	CHECK(strcmp(build("${.PVC.name}", "ns", big, "pv", "r"), big) == 0);
	big[200] = '\0';
	CHECK(strcmp(build("${.PVC.name}/${.PVC.name}", "ns", big, "pv", "r"), "ERR") == 0);
}

int main(void)
{
	test_default_pattern();
	test_user_pattern();
	test_lengths();
	return tap_done("test_ctl_dirname");
}
