#!/bin/sh
# Installs the dependencies, builds, and runs the driver with its embedded
# defaults: endpoint unix:///run/sepcsi/csi.sock, store and images under
# /var/lib/sepcsi. Extra arguments are passed to sepcsi-supervisor.
set -eu
cd "$(dirname "$0")/.."
tools/deps.sh
tools/build.sh build
exec build/bin/sepcsi-supervisor "$@"
