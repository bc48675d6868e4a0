#!/bin/sh
# Runs every libFuzzer target of a fuzz build for a bounded time:
#
#   tests/fuzz/run.sh BUILD_DIR [SECONDS]
#
# BUILD_DIR is configured with CC=clang -DSEPCSI_FUZZ=ON (tools/test.sh makes
# build-fuzz). Each harness runs for SECONDS (default $SEPCSI_FUZZ_SECONDS,
# else 30) on a copy of its corpus tests/fuzz/corpus/<name>/, so what it finds
# is never written into the repository, with ASan, UBSan and leak detection.
# Prints one line per harness with libFuzzer's execution count and coverage,
# and fails if any harness crashed, leaked, timed out or ran out of memory;
# its log and the input that did it are then kept and named.
set -eu
cd "$(dirname "$0")/../.."
build=${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]}
secs=${2:-${SEPCSI_FUZZ_SECONDS:-30}}
work=$(mktemp -d "${TMPDIR:-/tmp}/sepcsi-fuzz.XXXXXX")
failed=0

for corpus in tests/fuzz/corpus/*/; do
	name=$(basename "$corpus")
	bin=$build/bin/fuzz_$name
	if [ ! -x "$bin" ]; then
		echo "fuzz_$name: not built in $build (CC=clang cmake -DSEPCSI_FUZZ=ON)"
		failed=1
		continue
	fi
	dir=$work/$name
	mkdir -p "$dir/corpus" "$dir/artifacts"
	cp "$corpus"* "$dir/corpus/"
	# Inputs a little past each decoder's own limit (MH_MSG_MAX is 16384).
	case $name in
	mh_msg | mh_request) opts="-max_len=17000" ;;
	mh_client) opts="-max_len=20000" ;;
	policy) opts="-max_len=8192" ;;
	# The CSI harness keeps a store across inputs, whose caches grow: checking
	# for leaks after each input would stop the world every time. Leaks are
	# found at exit instead, once the store is closed.
	csi) opts="-max_len=8192 -detect_leaks=0" ;;
	*) opts="-max_len=4096" ;;
	esac
	# The helper client logs every protocol violation it sees: keep its
	# stderr out of the log (libFuzzer's own reports still get through).
	[ "$name" = mh_client ] && opts="$opts -close_fd_mask=2"
	status=ok
	# shellcheck disable=SC2086 # opts is a list of flags
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$dir/artifacts/" $opts "$dir/corpus" >"$dir/log" 2>&1 || status=FAILED
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
	cov=$(sed -n 's/.*\(cov: [0-9]*\).*/\1/p' "$dir/log" | tail -n 1)
	printf 'fuzz_%-11s %-6s %10s executions in %ss, %s, corpus %s -> %s inputs\n' "$name" \
		"$status" "${execs:-?}" "$secs" "${cov:-cov: ?}" "$(ls "$corpus" | wc -l)" \
		"$(ls "$dir/corpus" | wc -l)"
	if [ "$status" != ok ]; then
		failed=1
		tail -n 60 "$dir/log"
		# Replayed alone, an input shows the harness's own message (which
		# -close_fd_mask may have kept out of the log).
		for input in "$dir"/artifacts/*; do
			[ -f "$input" ] || continue
			echo "--- replaying $input"
			"$bin" "$input" 2>&1 | tail -n 20 || true
		done
		echo "fuzz_$name: log $dir/log; input(s):" "$dir"/artifacts/*
		echo "  (once fixed, add the input to $corpus as bug-<what>)"
	fi
done

if [ "$failed" = 0 ]; then
	rm -rf "$work"
else
	echo "fuzzing failed; logs and inputs kept in $work"
fi
exit "$failed"
