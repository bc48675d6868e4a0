#!/bin/sh
# Installs the dependencies, builds, and runs every test: formatting, static
# analysis (tools/lint.sh), the docs' generated tables against the code
# (tools/doctables.sh), the C unit tests (CTest), the end-to-end tests (pytest)
# against the real supervisor, rpcd and helper as root inside a private mount
# namespace, and the CSI conformance suite (csi-sanity, tests/conformance/sanity.py),
# first with AddressSanitizer and UndefinedBehaviorSanitizer, then without; each
# a test build (-DSEPCSI_TESTS=ON: the tests, and the pause points they hold).
# Then the shipped build (neither), whose privileged code tools/privsize.py
# counts; the container image and the node plugin's pod under podman
# (tests/container/container_test.py, with the shipped policy and again --core,
# without directory volumes), and last a bounded libFuzzer run of every fuzz
# harness (clang, build-fuzz).
# SEPCSI_TEST_FAST=1 skips the sanitizer pass; SEPCSI_FUZZ_SECONDS sets the time
# of each fuzz harness (default 30; 0 skips fuzzing).
set -eu
cd "$(dirname "$0")/.."
[ "${SEPCSI_SKIP_DEPS:-0}" = 1 ] || tools/deps.sh >/dev/null

echo "== clang-format check"
files=$(git ls-files '*.c' '*.h')
clang-format --dry-run --Werror $files

echo "== static analysis"
# Configures build/ (kept for the suite below) and analyses with its flags.
tools/lint.sh build

echo "== helper size"
/usr/bin/python3 tools/helper_size.py --by-feature

suite() {
	dir=$1
	shift
	echo "== build $dir $*"
	tools/build.sh "$dir" "$@"
	echo "== docs tables ($dir)"
	tools/doctables.sh "$dir"
	echo "== unit tests ($dir)"
	ctest --test-dir "$dir" --output-on-failure --no-tests=error -j 2
	echo "== end-to-end tests ($dir)"
	# LeakSanitizer needs ptrace, which the seccomp filters rightly forbid.
	# Each test has its own timeout (tests/e2e/pytest.ini); this one is the backstop.
	ASAN_OPTIONS=detect_leaks=0 SEPCSI_BUILD_DIR=$PWD/$dir timeout -k 30 1800 \
		unshare -m --propagation private \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/e2e
	echo "== conformance: csi-sanity ($dir)"
	ASAN_OPTIONS=detect_leaks=0 timeout -k 30 1800 unshare -m --propagation private \
		/usr/bin/python3 tests/conformance/sanity.py "$dir"
}

# Test builds (-DSEPCSI_TESTS=ON): the tests, and the pause points they hold.
if [ "${SEPCSI_TEST_FAST:-0}" != 1 ]; then
	suite build-asan -DSEPCSI_SANITIZE=ON -DSEPCSI_TESTS=ON
fi
suite build -DSEPCSI_TESTS=ON

# What ships: no tests, no pause points (as the README's run command and the
# container image build it).
echo "== build build-ship (as shipped)"
tools/build.sh build-ship -DSEPCSI_TESTS=OFF
if grep -l test_pause build-ship/bin/sepcsi-core build-ship/bin/sepcsi-mounthelper; then
	echo "test pause points in the shipped build" >&2
	exit 1
fi
echo "== privileged code: each process's capabilities and code lines (debug information)"
/usr/bin/python3 tools/privsize.py build-ship

echo "== container: the image and the node plugin's pod under podman"
timeout -k 30 1800 /usr/bin/python3 tests/container/container_test.py
echo "== container, without directory volumes: the helper beside its capable core"
timeout -k 30 1800 /usr/bin/python3 tests/container/container_test.py --core

fuzz_seconds=${SEPCSI_FUZZ_SECONDS:-30}
if [ "$fuzz_seconds" = 0 ]; then
	echo "== fuzzing skipped (SEPCSI_FUZZ_SECONDS=0)"
else
	echo "== fuzzing (${fuzz_seconds}s per harness)"
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEPCSI_FUZZ=ON >/dev/null
	cmake --build build-fuzz -j "$(nproc)" --target fuzz_all
	tests/fuzz/run.sh build-fuzz "$fuzz_seconds"
fi
