#!/bin/sh
# Static analysis gate: clang-tidy (checks in .clang-tidy) and cppcheck
# (tools/cppcheck.supp) over sepcsi's own C sources, with the flags of a real
# build taken from its compile_commands.json. Generated protobuf-c code is not
# analysed, but its headers are seen. Prints one summary line per tool and
# exits non-zero on any finding.
#
# Usage: tools/lint.sh [BUILD_DIR]   (default build; configured here when needed)
# SEPCSI_LINT_JOBS: parallel clang-tidy processes (default 2).
set -eu
cd "$(dirname "$0")/.."
root=$PWD
dir=${1:-build}
jobs=${SEPCSI_LINT_JOBS:-2}
tidy=$(command -v clang-tidy-14 || command -v clang-tidy)

# The compile database and the generated headers the sources include; a test
# build, so the tests and the test pause points are checked too.
cmake -S . -B "$dir" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DSEPCSI_TESTS=ON >/dev/null
cmake --build "$dir" --target sepcsi_csi_pb -j "$jobs" >/dev/null
builddir=$(cd "$dir" && pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# Our files: tracked by git and compiled by the build, each once per way it
# is built (a file built into several targets has the same flags in each,
# but for the core's own build of the rows it shares).
git ls-files '*.c' | sed "s|^|$root/|" >"$tmp/tracked"
/usr/bin/python3 - "$builddir/compile_commands.json" "$tmp/tracked" "$tmp" "$root/" <<'EOF'
import json, os, sys
db, tracked, out, root = sys.argv[1:]
ours = set(open(tracked).read().split())
# The rows the core shares with the helper are built twice, once with the
# core's own struct mh_msg (MH_PROTO_CORE): each build of a file is checked.
seen, entries = set(), []
for e in json.load(open(db)):
    key = (e["file"], "-DMH_PROTO_CORE" in e.get("command", " ".join(e.get("arguments", []))))
    if e["file"] in ours and key not in seen:
        seen.add(key)
        entries.append(e)
# cppcheck reads no "-include FILE" from a compile database: the units that
# read a header first (every unit but the core's reads proto/mh_proto_all.h
# first) go apart, to a run told that header with --include.
forced = {}
for e in entries:
    args = e.get("arguments") or e["command"].split()
    first = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-include"]
    forced.setdefault(first[0] if first else "", []).append(e)
for n, (first, group) in enumerate(sorted(forced.items())):
    json.dump(group, open("%s/cppcheck-%d.json" % (out, n), "w"), indent=1)
    open("%s/cppcheck-%d.first" % (out, n), "w").write(first)
files = sorted({e["file"] for e in entries})
open(out + "/files", "w").write("".join(f + "\n" for f in files))
# clang-tidy runs every build of a file given it, in one process (see below):
# each build goes to a database of its own, one entry per file in each.
builds = {}
for e in entries:
    builds.setdefault(e["file"], []).append(e)
dbs = [[b[k] for b in builds.values() if len(b) > k]
       for k in range(max(map(len, builds.values()), default=0))]
with open(out + "/tidy-jobs", "w") as jobs:
    for k, db in enumerate(dbs):
        os.makedirs("%s/db%d" % (out, k))
        json.dump(db, open("%s/db%d/compile_commands.json" % (out, k), "w"), indent=1)
        jobs.write("".join("%s/db%d %s\n" % (out, k, e["file"]) for e in db))
for f in sorted(ours - set(files)):
    print("lint: not built, so not analysed: " + f[len(root):], file=sys.stderr)
EOF
nfiles=$(wc -l <"$tmp/files")
status=0

# clang-tidy: one process per build of a file, each writing its own report.
# (One process given several files, or one file built twice, reports false
# va_list findings from the second on: clang-tidy 14's valist checker keeps
# state across them.)
start=$(date +%s)
mkdir "$tmp/tidy"
xargs -P "$jobs" -n 2 sh -c '
	out="$2/$(basename "$3")$(printf %s "$4" | tr / _)"
	"$1" -p "$3" --quiet "$4" >"$out" 2>&1 || echo "clang-tidy exited with $? on $4" >>"$out"
' sh "$tidy" "$tmp/tidy" <"$tmp/tidy-jobs"
cat "$tmp"/tidy/* | grep -v ' warnings\? generated\.$' >"$tmp/tidy.out" || true
# A finding is a diagnostic line; one in a header is reported once per file
# that includes it, and counted once.
findings=$(grep -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error): |^clang-tidy exited' "$tmp/tidy.out" |
	sort -u | wc -l)
if [ "$findings" -ne 0 ]; then
	cat "$tmp/tidy.out"
	status=1
fi
echo "clang-tidy: $nfiles files analysed, $findings findings ($(($(date +%s) - start)) s)"

# cppcheck: it does not read system headers, so it is told the one macro of
# libprotobuf-c's header that the generated headers test.
start=$(date +%s)
pbinc=$(pkg-config --variable=includedir libprotobuf-c)/protobuf-c/protobuf-c.h
pbver=$(sed -n 's/^#define[[:space:]]*PROTOBUF_C_VERSION_NUMBER[[:space:]]*\([0-9]*\).*/\1/p' "$pbinc")
: >"$tmp/cppcheck.out"
for project in "$tmp"/cppcheck-*.json; do
	first=$(cat "${project%.json}.first")
	cppcheck --project="$project" --std=c11 --platform=unix64 \
		--library=posix --library=gnu --library=sqlite3 \
		--enable=warning,style,performance,portability --inline-suppr \
		--suppressions-list=tools/cppcheck.supp --suppress="*:$builddir/*" \
		-DPROTOBUF_C_VERSION_NUMBER="$pbver" ${first:+--include="$first"} --quiet \
		--template='{file}:{line}:{column}: {severity}: {message} [{id}]' 2>>"$tmp/cppcheck.out" ||
		echo "cppcheck exited with $? on $project" >>"$tmp/cppcheck.out"
done
findings=$(grep -c . "$tmp/cppcheck.out" || true)
if [ "$findings" -ne 0 ]; then
	cat "$tmp/cppcheck.out"
	status=1
fi
echo "cppcheck: $nfiles files analysed, $findings findings ($(($(date +%s) - start)) s)"
exit $status
