#!/bin/sh
# Installs headless Chromium for the report-site test (cli/tests/report_site.rs renders every
# page of `dmsim report` in it). Debian/Ubuntu with apt, as root; prints why and exits 1 otherwise.
set -u
for c in chromium chromium-browser; do
  if command -v "$c" >/dev/null 2>&1; then exit 0; fi
done
if [ "$(id -u)" != 0 ]; then echo "install-chromium: not root; install Debian's chromium by hand" >&2; exit 1; fi
command -v apt-get >/dev/null 2>&1 || { echo "install-chromium: no apt-get" >&2; exit 1; }
echo "install-chromium: apt-get install chromium (once; about 100 MB)" >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1; } \
  || { echo "install-chromium: apt-get install chromium failed" >&2; exit 1; }
