#!/bin/sh
# Installs everything sepcsi needs to build, run and test on Debian 12 (as root).
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends \
	build-essential cmake pkg-config clang clang-format clang-tidy cppcheck libclang-rt-14-dev \
	libgrpc-dev protobuf-c-compiler libprotobuf-c-dev protobuf-compiler libprotobuf-dev \
	libinih-dev libcap-ng-dev libseccomp-dev libmount-dev libblkid-dev libsqlite3-dev libjson-c-dev \
	python3 python3-grpcio python3-protobuf python3-pytest python3-pytest-timeout \
	e2fsprogs xfsprogs btrfs-progs util-linux mount procps groff-base
