/*
 * The privilege tables of every process, printed from the tables the
 * code installs (policy/caps.c, policy/seccomp_*.c, policy/view.c, sup_caps.c) and never
 * written down anywhere else: the docs carry this output and
 * tools/doctables.sh fails when they differ.
 *
 * Pure code: reads compiled-in tables, needs no privilege, changes nothing.
 */
#include "sup_privtab.h"

#include "pol_caps.h"
#include "pol_md.h"
#include "pol_seccomp.h"
#include "pol_view.h"
#include "policy_all.h"
#include "sup_caps.h"
#include "sup_config.h"

#include <string.h>
#include <sys/stat.h>

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

/*
 * The kept table as masks: effective; permitted only (held for the helper);
 * and, overlapping those, the optional ones (kept only when the supervisor
 * starts with them).
 */
static void table_masks(uint64_t *effective, uint64_t *permitted_only, uint64_t *optional)
{
	size_t n;
	const struct sup_kept_cap *t = sup_caps_table(&n);
	*effective = *permitted_only = *optional = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t bit = UINT64_C(1) << t[i].cap;
		*(t[i].effective ? effective : permitted_only) |= bit;
		if (t[i].optional)
			*optional |= bit;
	}
}

/*
 * What sup_caps_trim() would keep in this process (an optional capability
 * counted if this process's bounding set has it): for --print-privileges.
 */
static void expected(uint64_t *effective, uint64_t *permitted)
{
	struct sup_capsets cs = {0};
	size_t n;
	const struct sup_kept_cap *t = sup_caps_table(&n);
	(void)sup_caps_read(&cs);
	*effective = *permitted = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t bit = UINT64_C(1) << t[i].cap;
		if (t[i].optional && !(cs.bounding & bit))
			continue;
		*permitted |= bit;
		if (t[i].effective)
			*effective |= bit;
	}
}

/* One row per process: uid, capabilities, no_new_privs, seccomp (docs/design.md). */
static void print_privileges(FILE *out)
{
	char a[2048], b[2048], c[2048], d[2048], e[2048], caps[10240], sc[128];
	uint64_t eff, prm, opt;

	pol_md_head(out, 5,
	            (const char *[]){"process", "uid", "capabilities", "no_new_privs", "seccomp"});

	table_masks(&eff, &prm, &opt);
	snprintf(caps, sizeof(caps), "%s effective; %s permitted only, for the helper%s%s%s",
	         cap_list(eff, a), cap_list(prm, b), opt ? " (" : "", opt ? cap_list(opt, c) : "",
	         opt ? " only if present)" : "");
	pol_md_row(out, 5, (const char *[]){"supervisor", "0", caps, "yes", "no"});

	pol_md_row(out, 5,
	           (const char *[]){"rpcd", "65532 (`--rpcd-user`)", "none (bounding set empty)",
	                            "yes",
	                            seccomp_cell(&pol_sc_rpcd, "seccomp_rpcd.c", sc, sizeof(sc))});
	pol_md_row(
	    out, 5,
	    (const char *[]){"metrics check (one per rpcd report, with `--metrics-file`)",
	                     "65533 (`--metrics-user`)", "none (bounding set empty)", "yes",
	                     seccomp_cell(&pol_sc_metrics, "seccomp_metrics.c", sc, sizeof(sc))});

	/* Beside its core it runs as its own uid, and so does its tool runner. */
	static const char helper_uid[] =
	    "65531 (`--helper-user`) once its core runs, as its tool runner; 0 with directory "
	    "volumes";
	opt = pol_caps_helper_optional_mask();
	snprintf(caps, sizeof(caps),
	         "%s with its core; with directory volumes (no core) %s%s%s%s, %s; securebits "
	         "locked; its tool runner, its audit writer (uid 0) and the tools hold none; its "
	         "tree runner (directory "
	         "volumes) %s only",
	         pol_caps_helper_core_mask() ? cap_list(pol_caps_helper_core_mask(), d) : "none",
	         cap_list(pol_caps_helper_mask(), a), opt ? " (+ " : "",
	         opt ? cap_list(opt, b) : "", opt ? " if present)" : "",
	         cap_list(pol_caps_helper_dirs_mask(), c), cap_list(pol_caps_tree_mask(), e));
	pol_md_row(
	    out, 5,
	    (const char *[]){"mounthelper", helper_uid, caps, "yes",
	                     seccomp_cell(&pol_sc_helper, "seccomp_helper.c", sc, sizeof(sc))});
	snprintf(caps, sizeof(caps),
	         "%s%s%s%s; securebits locked; the helper's child, without directory volumes; its "
	         "flusher and its reader hold none",
	         cap_list(pol_caps_helper_mask(), a), opt ? " (+ " : "",
	         opt ? cap_list(opt, b) : "", opt ? " if present)" : "");
	pol_md_row(out, 5,
	           (const char *[]){"core", "0", caps, "yes",
	                            seccomp_cell(&pol_sc_core, "seccomp_core.c", sc, sizeof(sc))});
	static const char reader_caps[] = "none (every set empty, securebits locked); the core's "
	                                  "child, in its view; Landlock: reading only";
	pol_md_row(
	    out, 5,
	    (const char *[]){"reader (STATS, LIST of mounts)", "0", reader_caps, "yes",
	                     seccomp_cell(&pol_sc_reader, "seccomp_reader.c", sc, sizeof(sc))});
}

static void print_seccomp_helper(FILE *out)
{
	pol_seccomp_print(&pol_sc_helper, out);
}

static void print_seccomp_core(FILE *out)
{
	pol_seccomp_print(&pol_sc_core, out);
}

static void print_seccomp_flusher(FILE *out)
{
	pol_seccomp_print(&pol_sc_flusher, out);
}

static void print_seccomp_reader(FILE *out)
{
	pol_seccomp_print(&pol_sc_reader, out);
}

static void print_seccomp_audit(FILE *out)
{
	pol_seccomp_print(&pol_sc_audit, out);
}

static void print_seccomp_tools(FILE *out)
{
	pol_seccomp_print(&pol_sc_tools, out);
}

static void print_seccomp_probe(FILE *out)
{
	pol_seccomp_print(&pol_sc_probe, out);
}

static void print_seccomp_tree(FILE *out)
{
	pol_seccomp_print(&pol_sc_tree, out);
}

static void print_seccomp_rpcd(FILE *out)
{
	pol_seccomp_print(&pol_sc_rpcd, out);
}

static void print_seccomp_metrics(FILE *out)
{
	pol_seccomp_print(&pol_sc_metrics, out);
}

/* The supervisor's kept capabilities as a Markdown table (capability, effective, why). */
static void caps_print(FILE *out)
{
	char name[32];
	size_t n;
	const struct sup_kept_cap *t = sup_caps_table(&n);
	pol_md_head(out, 3, (const char *[]){"capability", "effective", "why"});
	for (size_t i = 0; i < n; i++)
		pol_md_row(out, 3,
		           (const char *[]){pol_caps_name(t[i].cap, name, sizeof(name)),
		                            t[i].effective ? "yes" : "no", t[i].why});
}

static const struct {
	const char *name;
	void (*print)(FILE *out);
} tables[] = {
    {"privileges", print_privileges},           /* docs/design.md */
    {"caps-supervisor", caps_print},            /* docs/supervisor.md */
    {"caps-helper", pol_caps_print_helper},     /* docs/helper.md */
    {"seccomp-helper", print_seccomp_helper},   /* docs/helper.md */
    {"seccomp-core", print_seccomp_core},       /* docs/helper.md */
    {"seccomp-flusher", print_seccomp_flusher}, /* docs/helper.md */
    {"seccomp-reader", print_seccomp_reader},   /* docs/helper.md */
    {"seccomp-audit", print_seccomp_audit},     /* docs/helper.md */
    {"seccomp-tools", print_seccomp_tools},     /* docs/helper.md */
    {"seccomp-probe", print_seccomp_probe},     /* docs/helper.md */
    {"caps-tree", pol_caps_print_tree},         /* docs/helper.md */
    {"seccomp-tree", print_seccomp_tree},       /* docs/helper.md */
    {"seccomp-rpcd", print_seccomp_rpcd},       /* docs/rpcd.md */
    {"seccomp-metrics", print_seccomp_metrics}, /* docs/supervisor.md */
    {"view-helper", pol_view_print},            /* docs/helper.md */
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

/* ---- sepcsi-supervisor --print-privileges ---------------------------------- */

struct proc_priv {
	const char *name;
	unsigned uid, gid;
	uint64_t eff, prm, bnd;
	uint64_t amb; /* inheritable and ambient: kept across its exec */
	bool nnp;
	const struct pol_sc_table *seccomp; /* NULL: none */
	const char *seccomp_file;
	bool own_view; /* the helper's view (policy/view.c), else the host's */
	const char *note;
	unsigned fsuid, fsgid; /* the ids it writes files as, if other than uid, gid (else 0) */
};

/*
 * The paths in a view: the helper's (tools false), the tool runner's, or the
 * tree runner's; narrowed: the helper's beside a core, without the allowed
 * roots, /dev/loop-control and /proc (mh_view_leave_to_core, mh_view_drop_proc).
 */
static void view_json(FILE *out, const struct pol *pol, const struct sup_config *cfg, bool tools,
                      bool tree, bool narrowed)
{
	size_t n;
	const struct pol_view_entry *t = pol_view_table(&n);
	bool first = true;
	fputs("[", out);
	for (size_t i = 0; i < n; i++) {
		if (t[i].kind == POL_VIEW_LOOPS || (tools && !t[i].tools) ||
		    (tree && !pol_view_tree(&t[i])) ||
		    (narrowed && (t[i].kind == POL_VIEW_ROOTS || t[i].kind == POL_VIEW_PROC ||
		                  strcmp(t[i].path, "/dev/loop-control") == 0)))
			continue;
		if (t[i].kind == POL_VIEW_ROOTS) {
			for (size_t k = 0; pol_root(pol, k); k++, first = false)
				fprintf(out, "%s\"%s\"", first ? "" : ",", pol_root(pol, k));
			continue;
		}
		if (t[i].kind == POL_VIEW_BASES) {
			for (size_t k = 0; pol_base_dir(pol, k); k++, first = false)
				fprintf(out, "%s\"%s\",\"%s\"", first ? "" : ",",
				        pol_base_dir(pol, k), pol_view_ro_base(k));
			continue;
		}
		struct stat st;
		if ((t[i].kind == POL_VIEW_TOP || t[i].kind == POL_VIEW_RO_FILE) &&
		    lstat(t[i].path, &st) < 0)
			continue; /* only if the host has it */
		fprintf(out, "%s\"%s\"", first ? "" : ",",
		        t[i].kind == POL_VIEW_DATA ? cfg->data_dir : t[i].path);
		first = false;
	}
	fputs("]", out);
}

/* The helper's view beside its core, which its audit writer shares. */
static bool narrowed(const struct proc_priv *p, const struct pol *pol)
{
	return (p->seccomp == &pol_sc_helper || p->seccomp == &pol_sc_audit) &&
	       pol_base_dir(pol, 0) == NULL;
}

static void print_json(FILE *out, const struct proc_priv *p, size_t np, const struct pol *pol,
                       const struct sup_config *cfg)
{
	fputs("{\"processes\":[", out);
	for (size_t i = 0; i < np; i++) {
		fprintf(out,
		        "%s{\"name\":\"%s\",\"uid\":%u,\"gid\":%u,\"cap_effective\":\"%016llx\","
		        "\"cap_permitted\":\"%016llx\",\"cap_bounding\":\"%016llx\","
		        "\"cap_ambient\":\"%016llx\","
		        "\"fsuid\":%u,\"fsgid\":%u,"
		        "\"no_new_privs\":%d,\"seccomp\":%d,\"syscalls\":%zu,\"view\":",
		        i ? "," : "", p[i].name, p[i].uid, p[i].gid, (unsigned long long)p[i].eff,
		        (unsigned long long)p[i].prm, (unsigned long long)p[i].bnd,
		        (unsigned long long)p[i].amb, p[i].fsuid ? p[i].fsuid : p[i].uid,
		        p[i].fsgid ? p[i].fsgid : p[i].gid, p[i].nnp ? 1 : 0, p[i].seccomp ? 2 : 0,
		        p[i].seccomp ? pol_seccomp_syscall_count(p[i].seccomp) : 0);
		if (p[i].own_view)
			view_json(out, pol, cfg, p[i].seccomp == &pol_sc_tools,
			          p[i].seccomp == &pol_sc_tree, narrowed(&p[i], pol));
		else
			fputs("\"host\"", out);
		fputs("}", out);
	}
	fputs("]}\n", out);
}

static void print_text(FILE *out, const struct proc_priv *p, size_t np, const struct pol *pol,
                       const struct sup_config *cfg)
{
	char a[2048], ids[96], sc[128];
	for (size_t i = 0; i < np; i++) {
		fprintf(out, "## %s\n\n%s\n\n", p[i].name, p[i].note);
		if (p[i].fsuid)
			snprintf(ids, sizeof(ids), "%u / %u (writes files as %u / %u)", p[i].uid,
			         p[i].gid, p[i].fsuid, p[i].fsgid);
		else
			snprintf(ids, sizeof(ids), "%u / %u", p[i].uid, p[i].gid);
		pol_md_head(out, 2, (const char *[]){"", ""});
		pol_md_row(out, 2, (const char *[]){"uid / gid", ids});
		pol_md_row(
		    out, 2,
		    (const char *[]){"effective", p[i].eff ? cap_list(p[i].eff, a) : "none"});
		pol_md_row(
		    out, 2,
		    (const char *[]){"permitted", p[i].prm ? cap_list(p[i].prm, a) : "none"});
		pol_md_row(
		    out, 2,
		    (const char *[]){"bounding", p[i].bnd ? cap_list(p[i].bnd, a) : "empty"});
		if (p[i].amb)
			pol_md_row(out, 2,
			           (const char *[]){"inheritable, ambient", cap_list(p[i].amb, a)});
		pol_md_row(out, 2, (const char *[]){"no_new_privs", p[i].nnp ? "yes" : "no"});
		pol_md_row(
		    out, 2,
		    (const char *[]){"seccomp", p[i].seccomp
		                                    ? seccomp_cell(p[i].seccomp, p[i].seccomp_file,
		                                                   sc, sizeof(sc))
		                                    : "none"});
		pol_md_row(out, 2,
		           (const char *[]){"file-system view",
		                            !p[i].own_view ? "the host's"
		                            : narrowed(&p[i], pol)
		                                ? "its own (below), less the allowed roots, "
		                                  "/dev/loop-control and /proc once its core "
		                                  "runs"
		                                : "its own (below)"});
		fputs("\n", out);
		if (p[i].seccomp) {
			pol_seccomp_print(p[i].seccomp, out);
			fputs("\n", out);
		}
		if (p[i].own_view && (i + 1 == np || !p[i + 1].own_view)) {
			fprintf(out, "File-system view (allowed roots:");
			for (size_t k = 0; pol_root(pol, k); k++)
				fprintf(out, " %s", pol_root(pol, k));
			fprintf(out, "; data dir: %s):\n\n", cfg->data_dir);
			pol_view_print(out);
			fputs("\n", out);
		}
	}
}

int sup_print_privileges(const struct sup_config *cfg, bool json, FILE *out, char *err,
                         size_t errlen)
{
	struct pol *pol = NULL;
	if (pol_load(cfg->policy[0] ? cfg->policy : NULL, &pol, err, errlen) < 0)
		return -1;
	uint64_t eff, prm;
	expected(&eff, &prm);
	/* The capable one keeps an optional capability only if the supervisor can hand it over. */
	bool dirs = pol_base_dir(pol, 0) != NULL;
	uint64_t capable = pol_caps_helper_mask() | (pol_caps_helper_optional_mask() & prm);
	uint64_t helper =
	    dirs ? capable | pol_caps_helper_dirs_mask() : pol_caps_helper_core_mask();
	uint64_t tree = pol_caps_tree_mask();
	/* Beside its core the helper and its runner take the helper's identity (--helper-user). */
	uid_t hu = dirs ? 0 : cfg->helper_uid;
	gid_t hg = dirs ? 0 : cfg->helper_gid;
	const struct proc_priv all[] = {
	    {"sepcsi-supervisor", 0, 0, eff, prm, prm, 0, true, NULL, NULL, false,
	     "Starts, confines and restarts the other two; no network, no request parsing. "
	     "Holds its permitted-only capabilities for the helper alone.",
	     0, 0},
	    {"sepcsi-rpcd", cfg->rpcd_uid, cfg->rpcd_gid, 0, 0, 0, 0, true, &pol_sc_rpcd,
	     "seccomp_rpcd.c", false,
	     "Serves CSI on the unix socket and keeps the store; privileges dropped before "
	     "exec, its filter installed before gRPC starts.",
	     0, 0},
	    {"sepcsi-metrics-check", cfg->metrics_uid, cfg->metrics_gid, 0, 0, 0, 0, true,
	     &pol_sc_metrics, "seccomp_metrics.c", false,
	     "The supervisor's child for each of rpcd's metrics reports, with --metrics-file "
	     "(supervisor/sup_metrics_check.c): the one parser of the report, so the supervisor "
	     "parses none of it; privileges dropped before exec, to ids of its own (rpcd's could "
	     "write into it before its filter), not dumpable, its filter installed before it "
	     "reads a byte; it ends with its answer.",
	     0, 0},
	    {"sepcsi-mounthelper", hu, hg, helper, helper, helper, 0, true, &pol_sc_helper,
	     "seccomp_helper.c", true,
	     dirs ? "The only process that mounts (directory volumes on: no capable core). "
	            "Securebits NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, all locked; its "
	            "workers are forks with the same confinement."
	          : "Serves rpcd's protocol: images, probes and mkfs (through its runner), "
	            "copies, capacity; asks its child sepcsi-core for every mount, unmount, "
	            "freeze and growth. Starts as root and takes its own uid once the core runs: "
	            "it owns the images and nothing of root's. Securebits locked as the core's; "
	            "its workers are forks with the same confinement.",
	     0, 0},
	    {"sepcsi-core", 0, 0, capable, capable, capable, 0, true, &pol_sc_core,
	     "seccomp_core.c", true,
	     "The helper's child without directory volumes (mounthelper/core/): the only "
	     "process that mounts, attaches loop devices, freezes and grows, one request at a "
	     "time, re-checking each; parses no byte a tenant wrote and execs nothing. Its "
	     "capabilities are set before its exec by its starter, carried across it (then "
	     "emptied from its inheritable and ambient sets) and checked at its start. "
	     "Securebits NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, all locked; it forks "
	     "nothing: its flusher and its reader, started beside it, hold no capability.",
	     0, 0},
	    {"sepcsi-reader", 0, 0, 0, 0, 0, 0, true, &pol_sc_reader, "seccomp_reader.c", true,
	     "The core's child without directory volumes (mounthelper/reader/), forked in the "
	     "core's view before the core's exec: answers the helper's STATS, LIST of "
	     "mounts and STAGE_CHECK, which need no capability, so that their code is not in "
	     "the process holding CAP_SYS_ADMIN. Root without any capability (kubelet's "
	     "directories are root's), not dumpable; Landlock keeps it to reading: no file "
	     "written, made, removed or truncated anywhere, files read only under /proc, /sys, "
	     "/dev and the images.",
	     0, 0},
	    {"sepcsi-flusher", 0, 0, 0, 0, 0, 0, true, &pol_sc_flusher, "seccomp_core.c", true,
	     "The core's other child without directory volumes (sepcsi-reader --flusher, "
	     "mounthelper/reader/reader_flush.c), forked beside the reader: writes back the "
	     "file system the core hands it before an UNSTAGE or a FREEZE, so that the "
	     "core's one thread never waits for it. Root without any capability, not "
	     "dumpable, no descriptor but its socket to the core; its filter has no open of "
	     "any kind.",
	     0, 0},
	    {"sepcsi-audit", 0, 0, 0, 0, 0, 0, true, &pol_sc_audit, "seccomp_helper.c", true,
	     "The helper's child beside its core (mounthelper/mh_audit.c), forked while the "
	     "helper is still root: it alone holds helper-audit.log, and appends to it the "
	     "records the helper sends on a socket, so that the helper's uid cannot rewrite "
	     "what was recorded. Root without any capability, not dumpable, writing as the "
	     "helper's uid and gid (root's reserved blocks are not its); it shares the "
	     "helper's view.",
	     hu, hg},
	    {"sepcsi-runner", hu, hg, 0, 0, 0, 0, true, &pol_sc_tools, "seccomp_tools.c", true,
	     "The helper's child (runner/tools.c): starts the mkfs tools, sizes and copies "
	     "image files, and reads what an image holds (libblkid: the only parser of bytes "
	     "a tenant wrote), on descriptors the helper passes; the tools inherit all of this.",
	     0, 0},
	    {"sepcsi-tree-runner", 0, 0, tree, tree, tree, tree, true, &pol_sc_tree,
	     "seccomp_tree.c", true,
	     "The helper's child with directory volumes only (runner/tree.c): empties and "
	     "copies a volume's tree on the directory descriptors the helper passes; its "
	     "capabilities are ambient, so that they survive its exec.",
	     0, 0},
	};
	/*
	 * The core, its reader and the audit writer run without directory volumes, the tree
	 * runner with them.
	 */
	struct proc_priv p[sizeof(all) / sizeof(all[0])];
	size_t np = 0;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if ((dirs ? strcmp(all[i].name, "sepcsi-core") != 0 &&
		                strcmp(all[i].name, "sepcsi-reader") != 0 &&
		                strcmp(all[i].name, "sepcsi-flusher") != 0 &&
		                strcmp(all[i].name, "sepcsi-audit") != 0
		          : strcmp(all[i].name, "sepcsi-tree-runner") != 0) &&
		    (cfg->metrics_file[0] || strcmp(all[i].name, "sepcsi-metrics-check") != 0))
			p[np++] = all[i];
	if (json)
		print_json(out, p, np, pol, cfg);
	else
		print_text(out, p, np, pol, cfg);
	pol_free(pol);
	return fflush(out) == 0 ? 0 : -1;
}
