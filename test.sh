#!/bin/sh
# The project's whole test suite: every crate's tests, then the real-verbs tests in a
# Soft-RoCE VM (hw/vm/test.sh installs its own native dependencies; it prints a SKIP line and
# exits 0 on a host that cannot run the VM).
set -e
cd "$(dirname "$0")"
cargo test --workspace
hw/vm/test.sh
