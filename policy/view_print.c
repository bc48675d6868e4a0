/*
 * The helper's view table (view.c) as the docs and --print-privileges show
 * it. Linked only by what prints a table, never by a confined process.
 */
#include "pol_md.h"
#include "pol_view.h"

static const char *kind_text(enum pol_view_kind k)
{
	switch (k) {
	case POL_VIEW_TMPFS:
		return "tmpfs, nosuid, noexec";
	case POL_VIEW_ROOTS:
		return "the host's, shared, read-write";
	case POL_VIEW_BASES:
		return "the host's (its own mount only), read-write, nosuid, nodev; and read-only";
	case POL_VIEW_DATA:
		return "the host's, read-write, nosuid, nodev, noexec";
	case POL_VIEW_RO_DIR:
		return "read-only, nosuid, nodev";
	case POL_VIEW_TOP:
		return "the host's symlink, or a read-only bind";
	case POL_VIEW_RO_FILE:
		return "the host's file, read-only, if present";
	case POL_VIEW_PROC:
		return "a new procfs: subset=pid, hidepid=invisible";
	case POL_VIEW_NODE:
		return "a device node, the host's number";
	case POL_VIEW_LOOPS:
		return "block device nodes of the loop major";
	}
	return "?";
}

void pol_view_print(FILE *out)
{
	size_t n;
	const struct pol_view_entry *t = pol_view_table(&n);
	pol_md_head(out, 5, (const char *[]){"path", "what", "tool runner", "tree runner", "why"});
	for (size_t i = 0; i < n; i++) {
		pol_md_row(out, 5,
		           (const char *[]){t[i].path, kind_text(t[i].kind),
		                            t[i].tools ? "yes" : "no",
		                            pol_view_tree(&t[i]) ? "yes" : "no", t[i].why});
	}
}
