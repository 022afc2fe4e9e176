#!/bin/bash
# run-vm.sh - boot Debian's kernel in QEMU with a small busybox initramfs,
# bring up Soft-RoCE (rdma_rxe) as device rxe0 on a dummy netdev, run one
# guest shell command, power off.  Exit status = the guest command's status;
# 3 = host-side setup error, 4 = no result from the guest (timeout / panic).
#
# usage: run-vm.sh [-a SRC[:DST]]... [-t SECS] [-m MEM] [-c CPUS] [-o DIR] [-i] -- 'guest command'
#   -a  copy SRC into the initramfs at DST (default /opt/<basename>); ELF files
#       bring their shared libraries along (ldd).  Directories are copied as is.
#   -t  host-side timeout in seconds (default 600)
#   -i  interactive: a shell on the serial console after the command
# Inside the guest: $RXE_DEV=rxe0, $RXE_GID = RoCEv2 IPv4 GID index,
# $RXE_IP=10.77.0.1 (the netdev rxe0 is bound to), root, ulimit -l unlimited.
#
# Why TCG and not KVM: on the sandbox hosts this project runs on, /dev/kvm is
# a paravirtual hypervisor (kvm_pvm) that runs a stock kernel ~100x slower than
# plain emulation.  KVM is used only if the CPU advertises vmx/svm.
# Why PVH boot of an extracted vmlinux: it skips the in-guest decompression of
# the bzImage, ~8 s per boot under TCG.
# Env: DMSIM_VM_CACHE (default hw/vm/.cache: unpacked qemu and kernel, as left
# by hw/scripts/install-deps.sh), DMSIM_VM_ACCEL=auto|kvm|tcg, QEMU=path.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${DMSIM_VM_CACHE:-$HERE/.cache}
MEM=2G CPUS=2 TIMEOUT=600 OUTDIR= INTERACTIVE=0 ACCEL_MODE=${DMSIM_VM_ACCEL:-auto}
ADDS=()
while getopts "a:t:m:c:o:ih" o; do
  case $o in
    a) ADDS+=("$OPTARG") ;; t) TIMEOUT=$OPTARG ;; m) MEM=$OPTARG ;; c) CPUS=$OPTARG ;;
    o) OUTDIR=$OPTARG ;; i) INTERACTIVE=1 ;; *) sed -n '2,21p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND-1)); [ "${1:-}" = -- ] && shift
GUEST_CMD="$*"
log() { printf '[run-vm %(%T)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 3; }
T0=$(date +%s.%N)
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b-a}'; }

# ------------------------------------------------------------- qemu + kernel
QEMU=${QEMU:-$(command -v qemu-system-x86_64 || true)}
[ -z "$QEMU" ] && [ -x "$CACHE/qemu-root/usr/bin/qemu-system-x86_64" ] && QEMU=$CACHE/qemu-root/usr/bin/qemu-system-x86_64
[ -n "$QEMU" ] || die "qemu-system-x86_64 not found (run hw/scripts/install-deps.sh)"
QEMU_ARGS=()
qroot=$(dirname "$QEMU")/..
if [ -d "$qroot/share/qemu" ] && [ "$qroot" != /usr/bin/.. ]; then
  # an unpacked (dpkg -x) qemu: -L for its ROMs; -L replaces the built-in path,
  # so the system firmware dirs are listed too; modules (tcg accel) by env.
  QEMU_ARGS+=(-L "$(realpath "$qroot/share/qemu")")
  for d in /usr/share/seabios /usr/lib/ipxe/qemu /usr/share/qemu; do [ -d $d ] && QEMU_ARGS+=(-L $d); done
  [ -d "$qroot/lib/x86_64-linux-gnu/qemu" ] && export QEMU_MODULE_DIR=${QEMU_MODULE_DIR:-$(realpath "$qroot/lib/x86_64-linux-gnu/qemu")}
fi
newest_kernel() { # ROOT -> newest KVER with rdma_rxe.ko* and boot/vmlinuz-KVER
  local d k
  for d in $(ls -1d "$1"/lib/modules/*/ 2>/dev/null | sort -V -r); do
    k=$(basename "$d")
    [ -f "$1/boot/vmlinuz-$k" ] && [ -n "$(find "$d" -name 'rdma_rxe.ko*' -print -quit)" ] && { echo "$k"; return; }
  done; true
}
MODROOT=$CACHE/kroot; KVER=$(newest_kernel "$MODROOT")
[ -z "$KVER" ] && { MODROOT=; KVER=$(newest_kernel ""); }
[ -n "$KVER" ] || die "no kernel with rdma_rxe (run hw/scripts/install-deps.sh)"
KERNEL=$MODROOT/boot/vmlinuz-$KVER
[ -f "$MODROOT/lib/modules/$KVER/modules.dep" ] || depmod -b "${MODROOT:-/}" "$KVER"
case $ACCEL_MODE in
  auto) if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then ACCEL_MODE=kvm; else ACCEL_MODE=tcg; fi ;;
esac
case $ACCEL_MODE in
  kvm) QEMU_ARGS+=(-enable-kvm -cpu host) ;;
  tcg) QEMU_ARGS+=(-accel tcg,thread=multi -cpu max) ;;
  *) die "bad accelerator $ACCEL_MODE" ;;
esac

# ------------------------------------------------------------------- staging
OUTDIR=${OUTDIR:-$(mktemp -d "${TMPDIR:-/tmp}/dmsim-vm.XXXXXX")}
mkdir -p "$OUTDIR"; OUTDIR=$(realpath "$OUTDIR"); ST=$OUTDIR/stage
rm -rf "$ST"; mkdir -p "$ST"/usr/{bin,sbin,lib,lib64} "$ST"/{proc,sys,dev,tmp,run,etc,opt,root}
for d in bin sbin lib lib64; do ln -s usr/$d "$ST/$d"; done
declare -A COPIED
stage() { # SRC DST: copy dereferenced; /bin,/lib,... are symlinks into /usr
  local dst=$2
  case $dst in /bin/*|/sbin/*|/lib/*|/lib64/*) dst=/usr$dst ;; esac
  mkdir -p "$ST$(dirname "$dst")"; cp -L "$1" "$ST$dst"
}
stage_elf() { # SRC [DST]: the file plus every shared library ldd names
  local lib
  stage "$1" "${2:-$1}"
  head -c4 "$1" | grep -q ELF || return 0
  ldd "$1" 2>/dev/null | grep -q 'not found' && die "$1: missing shared libraries"
  for lib in $(ldd "$1" 2>/dev/null | awk '/=> \//{print $3} /^[ \t]*\/[^ ]*ld-linux/{print $1}'); do
    [ -n "${COPIED[$lib]:-}" ] && continue; COPIED[$lib]=1; stage "$lib" "$lib"
  done
}
BB=/bin/busybox; ldd "$BB" >/dev/null 2>&1 && die "need a static busybox (busybox-static)"
cp "$BB" "$ST/usr/bin/busybox"
for a in $("$BB" --list-full); do
  a=/${a#/}; case $a in /bin/*|/sbin/*) a=/usr$a ;; esac
  [ -e "$ST$a" ] || ln -s /usr/bin/busybox "$ST$a"
done
# Debian's busybox sh runs its applets before $PATH (so `ip` would be busybox's
# reduced one); dash does a normal PATH lookup.
rm -f "$ST/usr/bin/sh"; stage_elf "$(command -v dash)" /usr/bin/dash; ln -sf dash "$ST/usr/bin/sh"
for b in ip rdma ibv_devinfo ibv_devices ib_read_lat ib_atomic_lat ib_write_lat ib_read_bw; do
  p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v $b || true)
  [ -n "$p" ] || { log "note: $b not installed"; continue; }
  rm -f "$ST/usr/bin/$b" "$ST/usr/sbin/$b"; stage_elf "$p" /usr/bin/$b
done
PROV=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so 2>/dev/null | head -1)
[ -n "$PROV" ] || die "rxe provider missing (ibverbs-providers)"
stage_elf "$PROV"; mkdir -p "$ST/etc/libibverbs.d"; cp /etc/libibverbs.d/rxe.driver "$ST/etc/libibverbs.d/"
for spec in "${ADDS[@]}"; do
  src=${spec%%:*}; dst=${spec#*:}; [ "$dst" = "$spec" ] && dst=/opt/$(basename "$src")
  [ -e "$src" ] || die "-a $src: no such file"
  if [ -d "$src" ]; then mkdir -p "$ST$dst"; cp -a "$src/." "$ST$dst/"; else stage_elf "$src" "$dst"; chmod +x "$ST$dst"; fi
done
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$ST/etc/passwd"; printf 'root:x:0:\n' > "$ST/etc/group"
printf '127.0.0.1 localhost\n10.77.0.1 rxe-vm\n' > "$ST/etc/hosts"
ldconfig -r "$ST" 2>/dev/null || true

# kernel modules: rdma_rxe and what it needs.  crc32 is a soft dependency that
# modules.dep does not list; without it `rdma link add` fails with ENOENT.
MODS=()
for m in crc32_generic crc32-pclmul rdma_rxe dummy; do
  while read -r kw path _; do
    [ "$kw" = insmod ] || continue
    path=${path#"$MODROOT"}; [[ " ${MODS[*]} " == *" $path "* ]] || MODS+=("$path")
  done < <(modprobe -d "${MODROOT:-/}" -S "$KVER" --show-depends "$m")
done
: > "$ST/etc/modules.order"
for p in "${MODS[@]}"; do # busybox insmod cannot read compressed modules
  mkdir -p "$ST$(dirname "$p")"
  case $p in
    *.ko.xz) xz -dc "$MODROOT$p" > "$ST${p%.xz}"; p=${p%.xz} ;;
    *.ko.zst) zstd -qdc "$MODROOT$p" > "$ST${p%.zst}"; p=${p%.zst} ;;
    *) cp "$MODROOT$p" "$ST$p" ;;
  esac
  echo "$p" >> "$ST/etc/modules.order"
done

cat > "$ST/init" <<'INIT'
#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /tmp; mount -t tmpfs tmpfs /dev/shm
ulimit -l unlimited
for m in $(cat /etc/modules.order); do
  case $m in */dummy.ko) insmod $m numdummies=0 ;; *) insmod $m ;; esac || echo "insmod $m failed"
done
ip link set lo up
ip link add dummy0 type dummy && ip addr add 10.77.0.1/24 dev dummy0 && ip link set dummy0 up
rdma link add rxe0 type rxe netdev dummy0 || echo "rdma link add failed"
RXE_GID=
for i in 0 1 2 3 4 5 6 7; do  # the RoCE v2 GID of the IPv4 address
  g=$(cat /sys/class/infiniband/rxe0/ports/1/gids/$i 2>/dev/null) || continue
  t=$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i 2>/dev/null)
  case $g in 0000:0000:0000:0000:0000:ffff:*) [ "$t" = "RoCE v2" ] && { RXE_GID=$i; break; } ;; esac
done
export RXE_DEV=rxe0 RXE_GID=${RXE_GID:-1} RXE_IP=10.77.0.1
echo "@@ rxe0 up at $(cut -d' ' -f1 /proc/uptime)s gid_index=$RXE_GID"
cd /opt; sh /guest-cmd.sh; rc=$?
echo "DMSIM_VM_RC=$rc"
grep -q dmsim_vm_shell /proc/cmdline && setsid cttyhack sh -l
sync; reboot -f
INIT
chmod +x "$ST/init"
printf '%s\n' "${GUEST_CMD:-true}" > "$ST/guest-cmd.sh"
INITRD=$OUTDIR/initramfs.cpio
(cd "$ST" && find . -print0 | cpio --null -o -H newc --quiet) > "$INITRD"

BOOT=$KERNEL VMLINUX=$CACHE/vmlinux-$KVER
if [ ! -s "$VMLINUX" ] || [ "$VMLINUX" -ot "$KERNEL" ]; then
  mkdir -p "$CACHE"
  # the bzImage payload is xz (Debian 12) or zstd (newer kernels)
  for spec in 'xz:\xfd\x37\x7a\x58\x5a\x00' 'zstd:\x28\xb5\x2f\xfd' 'gzip:\x1f\x8b\x08'; do
    tool=${spec%%:*}; magic=${spec#*:}; command -v "$tool" >/dev/null || continue
    for off in $(LC_ALL=C grep -obUaP "$magic" "$KERNEL" | head -3 | cut -d: -f1); do
      tail -c +$((off + 1)) "$KERNEL" | "$tool" -dcq > "$VMLINUX.tmp" 2>/dev/null || true
      [ "$(head -c4 "$VMLINUX.tmp" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] && { mv "$VMLINUX.tmp" "$VMLINUX"; break 2; }
    done
  done
  rm -f "$VMLINUX.tmp"
fi
[ -s "$VMLINUX" ] && BOOT=$VMLINUX
T1=$(date +%s.%N)
log "initramfs $(du -h "$INITRD" | cut -f1) staged in $(secs "$T0" "$T1")s; kernel $KVER; accel $ACCEL_MODE"

# tsc=reliable: under TCG the kernel finds the TSCs "unsynchronized" and falls back to the HPET
# clocksource, which makes every clock_gettime a trap into emulated MMIO (tens of µs); a
# program that reads the clock per verb (the dmsim-hw runtime does) then measures the clock.
# no_timer_check: under host load, TCG can miss the boot-time timer IRQ check and the kernel
# panics with "IO-APIC + timer doesn't work" (seen once on this machine at load 9).
APPEND="console=ttyS0 quiet loglevel=4 panic=-1 rdinit=/init tsc=reliable no_timer_check"
[ "$INTERACTIVE" = 1 ] && APPEND="$APPEND dmsim_vm_shell"
LOG=$OUTDIR/console.log
QCMD=("$QEMU" "${QEMU_ARGS[@]}" -machine q35 -m "$MEM" -smp "$CPUS" -nographic -no-reboot
      -nic none -kernel "$BOOT" -initrd "$INITRD" -append "$APPEND")
set +e
if [ "$INTERACTIVE" = 1 ]; then "${QCMD[@]}" 2>&1 | tee "$LOG"
else timeout --foreground -k 5 "$TIMEOUT" "${QCMD[@]}" < /dev/null 2>&1 | tr -d '\r' | tee "$LOG"; fi
set -e
RC=$(sed -n 's/^DMSIM_VM_RC=\([0-9]*\).*/\1/p' "$LOG" | tail -1)
log "guest rc=${RC:-none} after $(secs "$T1" "$(date +%s.%N)")s in qemu; log $LOG"
[ -n "$RC" ] || { log "no DMSIM_VM_RC marker: guest timed out or panicked"; exit 4; }
exit "$RC"
