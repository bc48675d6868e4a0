/*
 * The privilege tables of all three processes, printed from the tables the
 * code installs (policy/caps.c, policy/seccomp.c, sup_caps.c) and never
 * written down anywhere else: the docs carry this output and
 * tools/doctables.sh fails when they differ.
 *
 * Pure code: reads compiled-in tables, needs no privilege, changes nothing.
 */
#include "sup_privtab.h"

#include "pol_caps.h"
#include "pol_md.h"
#include "pol_seccomp.h"
#include "sup_caps.h"

#include <string.h>

/* The names of the capabilities in mask, ", " between them; big enough for all 64. */
static const char *cap_list(uint64_t mask, char buf[2048])
{
	size_t used = 0;
	buf[0] = '\0';
	for (unsigned int c = 0; c < 64; c++) {
		char name[32];
		if (!(mask & (UINT64_C(1) << c)))
			continue;
		int w = snprintf(buf + used, 2048 - used, "%s%s", used ? ", " : "",
		                 pol_caps_name(c, name, sizeof(name)));
		if (w > 0 && (size_t)w < 2048 - used)
			used += (size_t)w;
	}
	return buf;
}

static const char *seccomp_cell(const struct pol_sc_table *t, const char *file, char *buf,
                                size_t len)
{
	snprintf(buf, len, "allowlist of %zu system calls, `policy/%s`",
	         pol_seccomp_syscall_count(t), file);
	return buf;
}

/* One row per process: uid, capabilities, no_new_privs, seccomp (docs/design.md). */
static void print_privileges(FILE *out)
{
	char a[2048], b[2048], c[2048], caps[8192], sc[128];
	uint64_t eff, prm, opt;

	pol_md_head(out, 5,
	            (const char *[]){"process", "uid", "capabilities", "no_new_privs", "seccomp"});

	sup_caps_table_masks(&eff, &prm, &opt);
	snprintf(caps, sizeof(caps), "%s effective; %s permitted only, for the helper%s%s%s",
	         cap_list(eff, a), cap_list(prm, b), opt ? " (" : "", opt ? cap_list(opt, c) : "",
	         opt ? " only if present)" : "");
	pol_md_row(out, 5, (const char *[]){"supervisor", "0", caps, "yes", "no"});

	pol_md_row(out, 5,
	           (const char *[]){"rpcd", "65532 (`--rpcd-user`)", "none (bounding set empty)",
	                            "yes",
	                            seccomp_cell(&pol_sc_rpcd, "seccomp_rpcd.c", sc, sizeof(sc))});

	opt = pol_caps_helper_optional_mask();
	snprintf(caps, sizeof(caps),
	         "%s%s%s%s; securebits make every program it runs capability-less",
	         cap_list(pol_caps_helper_mask(), a), opt ? " (+ " : "",
	         opt ? cap_list(opt, b) : "", opt ? " if present)" : "");
	pol_md_row(
	    out, 5,
	    (const char *[]){"mounthelper", "0", caps, "yes",
	                     seccomp_cell(&pol_sc_helper, "seccomp_helper.c", sc, sizeof(sc))});
}

static void print_seccomp_helper(FILE *out)
{
	pol_seccomp_print(&pol_sc_helper, out);
}

static void print_seccomp_tools(FILE *out)
{
	pol_seccomp_print(&pol_sc_tools, out);
}

static void print_seccomp_rpcd(FILE *out)
{
	pol_seccomp_print(&pol_sc_rpcd, out);
}

static const struct {
	const char *name;
	void (*print)(FILE *out);
} tables[] = {
    {"privileges", print_privileges},         /* docs/design.md */
    {"caps-supervisor", sup_caps_print},      /* docs/supervisor.md */
    {"caps-helper", pol_caps_print_helper},   /* docs/helper.md */
    {"seccomp-helper", print_seccomp_helper}, /* docs/helper.md */
    {"seccomp-tools", print_seccomp_tools},   /* docs/helper.md */
    {"seccomp-rpcd", print_seccomp_rpcd},     /* docs/rpcd.md */
};

#define NTABLES (sizeof(tables) / sizeof(tables[0]))

const char *sup_privtab_name(size_t i)
{
	return i < NTABLES ? tables[i].name : NULL;
}

int sup_privtab_print(const char *name, FILE *out)
{
	for (size_t i = 0; i < NTABLES; i++) {
		if (strcmp(tables[i].name, name) == 0) {
			tables[i].print(out);
			return 0;
		}
	}
	return -1;
}
