#!/bin/bash
# install-deps.sh - every native dependency of dmsim-hw's `rdma` feature and of
# its Soft-RoCE VM test harness (hw/vm/test.sh), on Debian 12 (bookworm), as root.
#
# What it installs, and why:
#  * build deps of hw/verbs-sys (bindgen over the system's verbs.h, linked
#    against the system's libibverbs): libclang, pkg-config, libibverbs-dev;
#  * guest userspace copied into the VM's initramfs: busybox-static, dash,
#    iproute2 (ip, rdma), ibverbs-providers (the rxe provider), ibverbs-utils,
#    perftest (ib_read_lat / ib_atomic_lat for the latency comparison), cpio,
#    kmod, xz/zstd (module and vmlinux decompression);
#  * qemu-system-x86_64: installed by apt if apt agrees; on hosts where a newer
#    qemu-utils blocks it (Breaks qemu-system-common < 8.0) the .debs are
#    unpacked into $CACHE/qemu-root and only their libraries are installed;
#  * a Debian kernel with rdma_rxe: its .deb is unpacked into $CACHE/kroot
#    (dpkg -x + depmod; installing it would run update-initramfs, ~2 min).
#
# CACHE = $DMSIM_VM_CACHE, default hw/vm/.cache (gitignored).  Idempotent: a
# second run with everything present does no network access beyond apt's
# "already newest" checks.  Exit 0 on success, non-zero with a message otherwise.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${DMSIM_VM_CACHE:-$HERE/../vm/.cache}
mkdir -p "$CACHE"; CACHE=$(realpath "$CACHE")
APT=(apt-get -o DPkg::Lock::Timeout=600 -y -q --no-install-recommends)
export DEBIAN_FRONTEND=noninteractive
log() { printf '[install-deps %(%T)T] %s\n' -1 "$*" >&2; }

[ "$(id -u)" = 0 ] || { log "must run as root (apt-get install)"; exit 1; }
command -v apt-get >/dev/null || { log "not a Debian/apt system"; exit 1; }

PKGS=(libclang1-14 libclang-common-14-dev pkg-config libibverbs-dev libibverbs1
      ibverbs-providers ibverbs-utils perftest rdma-core busybox-static dash cpio kmod
      xz-utils zstd iproute2)
missing=()
for p in "${PKGS[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  # apt lists go stale between sessions: refresh once before installing
  log "apt-get update"; apt-get -o DPkg::Lock::Timeout=600 -q update >/dev/null
  log "installing ${missing[*]}"
  "${APT[@]}" install "${missing[@]}" >/dev/null
fi

runtime_deps() { # Depends of .deb files, without qemu-* and alternatives
  for f in "$@"; do dpkg-deb -f "$f" Depends; done | tr ',' '\n' |
    sed 's/([^)]*)//; s/|.*//; s/ //g' | grep -v -E '^(qemu-|$)' | sort -u
}
if ! command -v qemu-system-x86_64 >/dev/null && [ ! -x "$CACHE/qemu-root/usr/bin/qemu-system-x86_64" ]; then
  log "qemu-system-x86_64: trying apt"
  if ! "${APT[@]}" --no-remove install qemu-system-x86 >"$CACHE/apt-qemu.log" 2>&1; then
    log "apt refused qemu-system-x86; unpacking its .debs into $CACHE/qemu-root"
    rm -rf "$CACHE/qemu-debs" "$CACHE/qemu-root"; mkdir -p "$CACHE/qemu-debs"
    (cd "$CACHE/qemu-debs" && apt-get -q download qemu-system-x86 qemu-system-common qemu-system-data >/dev/null)
    # shellcheck disable=SC2046
    "${APT[@]}" install $(runtime_deps "$CACHE"/qemu-debs/qemu-system-x86_*.deb) seabios ipxe-qemu >/dev/null
    for f in "$CACHE"/qemu-debs/*.deb; do dpkg -x "$f" "$CACHE/qemu-root"; done
    rm -rf "$CACHE/qemu-debs"
  fi
fi

kernel_ok() { # any kernel under ROOT with rdma_rxe + vmlinuz?
  local d
  for d in "$1"/lib/modules/*/; do
    [ -f "$1/boot/vmlinuz-$(basename "$d")" ] && [ -n "$(find "$d" -name 'rdma_rxe.ko*' -print -quit)" ] && return 0
  done
  return 1
}
if ! kernel_ok "$CACHE/kroot" 2>/dev/null; then
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  [ -n "$pkg" ] || { log "cannot resolve linux-image-amd64 (apt-get update?)"; exit 1; }
  ver=${pkg#linux-image-}
  log "unpacking $pkg into $CACHE/kroot"
  rm -rf "$CACHE/kdeb"; mkdir -p "$CACHE/kdeb"
  (cd "$CACHE/kdeb" && apt-get -q download "$pkg" >/dev/null)
  dpkg -x "$CACHE"/kdeb/*.deb "$CACHE/kroot"
  rm -rf "$CACHE/kdeb"
  depmod -b "$CACHE/kroot" "$ver"
fi
log "done (cache: $CACHE)"
