#!/bin/sh
# The project's whole test suite: every crate's tests, then the real-verbs tests in a
# Soft-RoCE VM (hw/vm/test.sh installs its own native dependencies; it prints a SKIP line and
# exits 0 on a host that cannot run the VM).
set -e
cd "$(dirname "$0")"
# Headless Chromium renders the `dmsim report` site in cli/tests/report_site.rs; once installed,
# that test requires it (without it, it checks the site statically and says SKIP).
if sh cli/scripts/install-chromium.sh; then export DMSIM_REQUIRE_CHROMIUM=1; fi
cargo test --workspace
hw/vm/test.sh
