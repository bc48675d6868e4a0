#!/usr/bin/env python3
"""The size of the privileged helper, as an auditor would read it.

Counts the lines of C of mounthelper/ (the helper's own code; nothing else in the
tree is linked by the helper alone) and, for context, of the libraries it shares
with other binaries (policy/, proto/, common/) and of runner/ (sepcsi-runner, which
the helper starts twice: as the tools runner, capability-less, for mkfs and for
sizing and copying image files; and with directory volumes as the tree runner,
which walks volumes' trees with four file capabilities and no CAP_SYS_ADMIN, in a
view without kubelet's directories: counted apart from the helper, and printed). "code" is the lines that are
neither blank nor comment; "all" is every line. With --max N, exits 1 when the
helper's own code lines exceed N. With --by-feature, also prints the helper's own
code by what it serves (FEATURES below; a file of mounthelper/ that no feature
names is an error, so the table stays whole).

mounthelper/core/ (sepcsi-core, the capable core being split out) is not counted here:
tools/privsize.py counts every binary, that one included, from its debug information.

Usage: tools/helper_size.py [--max N] [--per-file] [--by-feature]
"""
import argparse
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OWN = ["mounthelper"]
SHARED = ["policy", "proto", "common"]
RUNNER = ["runner"]
TREE = ["runner/tree.c"]  # the tree runner's own part of runner/

# What each file of mounthelper/ serves (a .c and its .h together).
FEATURES = [
    ("serving requests: main loop, worker pool, dispatch table, audit, test pauses, "
     "questions to the capable core",
     ["mh.h", "mh_main.c", "mh_worker", "mh_dispatch.c", "mh_table.c", "mh_pause",
      "mh_ops.h", "mh_helper_ops.h", "mh_relay.c"]),
    ("re-validation and ownership: ids, this volume, careful unmount", ["mh_common"]),
    ("paths beneath kubelet's roots, and the helper's own view", ["mh_at", "mh_view"]),
    ("its own identity beside its core, and the images handed to it", ["mh_identity"]),
    ("its audit writer beside its core", ["mh_audit"]),
    ("mounts and what is mounted where", ["mh_mount", "mh_mountinfo.c"]),
    ("loop devices and their records", ["mh_loop", "mh_loop_records"]),
    ("image volumes: create, delete, stage, publish, probe and mkfs",
     ["mh_ops.c", "mh_image", "mh_image_life", "mh_mkfs", "mh_tools"]),
    ("raw block volumes", ["mh_block"]),
    ("snapshots and clones: copies, freezes, block metadata",
     ["mh_copy", "mh_blocks"]),
    ("expansion", ["mh_resize"]),
    ("capacity: what is promised", ["mh_space"]),
    ("volume stats and condition", ["mh_stats.c", "mh_looks.h"]),
    ("reconciliation (LIST) and the start-up sweep",
     ["mh_list", "mh_list_mounts.c", "mh_sweep.c"]),
    ("directory volumes", ["mh_dir", "mh_dir_area", "mh_quota", "mh_btrfs", "mh_tree"]),
]


def count(path):
    with open(path) as f:
        text = f.read()
    total = text.count("\n")
    # Comments become blank lines (strings holding "/*" do not occur in this tree).
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return sum(1 for line in text.splitlines() if line.strip()), total


def sources(directory):
    return sorted(glob.glob(os.path.join(ROOT, directory, "*.[ch]")))


def tally(directories, per_file=False):
    lines = [0, 0]
    for d in directories:
        for p in sources(d):
            code, total = count(p)
            lines[0] += code
            lines[1] += total
            if per_file:
                print("  %5d %5d  %s" % (code, total, os.path.relpath(p, ROOT)))
    return lines


def by_feature():
    """Prints the helper's own code lines per feature; False if a file has none."""
    files = {os.path.basename(p): p for p in sources(OWN[0])}
    rows, seen = [], set()
    for label, names in FEATURES:
        mine = [f for f in files if any(f == n or f.startswith(n + ".") for n in names)]
        seen.update(mine)
        rows.append((sum(count(files[f])[0] for f in mine), label))
    for lines, label in rows:
        print("  %5d  %s" % (lines, label))
    missing = sorted(set(files) - seen)
    if missing:
        print("helper size: no feature names %s (tools/helper_size.py, FEATURES)" %
              ", ".join(missing))
    return not missing


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, help="fail if the helper's own code lines exceed this")
    ap.add_argument("--per-file", action="store_true", help="print each file's counts")
    ap.add_argument("--by-feature", action="store_true",
                    help="print the helper's own code lines by what they serve")
    args = ap.parse_args()
    own = tally(OWN, args.per_file)
    shared, runner = tally(SHARED), tally(RUNNER)
    tree = [sum(x) for x in zip(*(count(os.path.join(ROOT, p)) for p in TREE))]
    print("helper size: own code %d lines (%d with comments and blank lines) in %s; "
          "shared with other binaries %d (%d) in %s; its runners %d (%d) in %s, of which "
          "the tree runner's walk, privileged with file capabilities but not CAP_SYS_ADMIN, "
          "%d (%d) in %s" % (
              own[0], own[1], ", ".join(d + "/" for d in OWN), shared[0], shared[1],
              ", ".join(d + "/" for d in SHARED), runner[0], runner[1],
              ", ".join(d + "/" for d in RUNNER), tree[0], tree[1], ", ".join(TREE)))
    if args.by_feature and not by_feature():
        return 1
    if args.max is not None and own[0] > args.max:
        print("helper size: over the limit of %d code lines by %d" % (args.max,
                                                                      own[0] - args.max))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
