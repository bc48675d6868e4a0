#!/bin/sh
# Checks that the tables the docs carry between
#   <!-- generated: NAME -->
#   <!-- end generated -->
# are exactly what the code prints (BUILD_DIR/bin/sepcsi-privtables NAME), and
# that every table the printer knows appears in some doc. A difference fails
# with the diff shown; --update rewrites the blocks from the printer instead.
#   tools/doctables.sh [BUILD_DIR] [--update]      (BUILD_DIR defaults to build)
set -eu
cd "$(dirname "$0")/.."

build=build
update=0
for a in "$@"; do
	case $a in
	--update) update=1 ;;
	-*)
		echo "usage: tools/doctables.sh [BUILD_DIR] [--update]" >&2
		exit 2
		;;
	*) build=$a ;;
	esac
done
printer=$build/bin/sepcsi-privtables
if [ ! -x "$printer" ]; then
	echo "doctables: $printer is not built" >&2
	exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for name in $("$printer"); do
	"$printer" "$name" >"$tmp/$name.md"
done

status=0
differ=0
for doc in README.md docs/*.md; do
	grep -q '^<!-- generated: ' "$doc" || continue
	# Copy the doc, replacing each block's body with the printer's output.
	if ! awk -v dir="$tmp" -v doc="$doc" '
		function fail(msg) { printf "doctables: %s:%d: %s\n", doc, NR, msg > "/dev/stderr"; bad = 1; exit 1 }
		/^<!-- generated: / {
			if (name != "") fail("block \"" name "\" is not closed")
			if (NF != 4 || $4 != "-->" || $3 !~ /^[a-z0-9-]+$/) fail("malformed marker")
			name = $3
			file = dir "/" name ".md"
			if ((getline line < file) <= 0) fail("no table \"" name "\" (sepcsi-privtables lists them)")
			print
			do print line; while ((getline line < file) > 0)
			close(file)
			print name >> (dir "/used")
			next
		}
		/^<!-- end generated -->$/ {
			if (name == "") fail("end marker without a block")
			name = ""
			print
			next
		}
		name == "" { print }
		END { if (!bad && name != "") fail("block \"" name "\" is not closed") }
	' "$doc" >"$tmp/new"; then
		status=1
		continue
	fi
	if ! cmp -s "$doc" "$tmp/new"; then
		if [ "$update" = 1 ]; then
			cat "$tmp/new" >"$doc"
			echo "doctables: updated $doc"
		else
			diff -u --label "$doc" --label "$doc (from the code)" "$doc" "$tmp/new" || true
			differ=1
			status=1
		fi
	fi
done

for name in $("$printer"); do
	if ! grep -qx "$name" "$tmp/used" 2>/dev/null; then
		echo "doctables: table \"$name\" is in no doc (add <!-- generated: $name --> ... <!-- end generated -->)" >&2
		status=1
	fi
done

if [ "$differ" = 1 ]; then
	echo "doctables: the docs differ from the code; rerun with --update to rewrite them" >&2
fi
exit "$status"
