#!/bin/sh
# Installs what sepcsi needs on Debian 12 (as root).
#   tools/deps.sh          everything: build, run and test (what tools/test.sh uses)
#   tools/deps.sh build    what tools/build.sh needs to compile
#   tools/deps.sh run      what the built programs need at run time (shared
#                          libraries, the mkfs and grow tools, mount utilities)
# deploy/Containerfile uses the first two groups, so the image and a host built
# by hand get the same packages.
set -eu
export DEBIAN_FRONTEND=noninteractive

build="build-essential cmake pkg-config
	libgrpc-dev protobuf-c-compiler libprotobuf-c-dev protobuf-compiler libprotobuf-dev
	libinih-dev libcap-ng-dev libseccomp-dev libmount-dev libblkid-dev libsqlite3-dev libjson-c-dev"
run="libgrpc29 libprotobuf-c1 libinih1 libcap-ng0 libseccomp2 libmount1 libblkid1 libsqlite3-0
	libjson-c5 e2fsprogs xfsprogs btrfs-progs util-linux mount"
# python3-yaml parses deploy/kubernetes/ and systemd's systemd-analyze checks the
# unit (tests/e2e/test_deploy.py); groff-base checks the man pages (test_install.py);
# python3-prometheus-client parses the metrics file (test_metrics.py); iproute2's ss
# pairs a socket's two ends (test_helper_identity.py); fio measures I/O inside a volume
# (tests/bench/datapath.py); strace holds a helper worker between two thaws
# (test_group_snapshots.py). podman (with
# runc, its network helpers and catatonit, which are only recommended) and debootstrap
# run the image and the node plugin's pod (tests/container/container_test.py).
test="clang clang-format clang-tidy cppcheck libclang-rt-14-dev
	python3 python3-grpcio python3-protobuf python3-pytest python3-pytest-timeout python3-yaml
	python3-prometheus-client groff-base systemd procps iproute2 fio strace
	podman runc netavark aardvark-dns catatonit iptables containernetworking-plugins uidmap
	debootstrap"

case "${1:-all}" in
build) pkgs=$build ;;
run) pkgs=$run ;;
all) pkgs="$build $run $test" ;;
*)
	echo "usage: $0 [build|run|all]" >&2
	exit 2
	;;
esac

apt-get update
# shellcheck disable=SC2086 # the lists are meant to split into words
apt-get install -y --no-install-recommends $pkgs
