#!/bin/bash
# test.sh - real-verbs tests of dmsim-hw on Soft-RoCE (rdma_rxe) inside a QEMU VM.
#
# One command: installs what it needs (hw/scripts/install-deps.sh, as root), builds the rdma
# test binaries, boots the VM (hw/vm/run-vm.sh) and runs inside it, over rxe0:
#   1. verbs        - verb-level tests (READ/WRITE/CAS/FAA results, doorbell batches,
#                     SEND/RECV, bad rkey, out-of-bounds, a peer that went away, timeouts)
#   2. cluster      - 1 memory node + 2 compute nodes as 3 processes (TCP rendezvous,
#                     HwNic verbs + messages, a latch-protected counter that must not lose updates)
#   3. selcc        - the SELCC protocol (protocols/src/selcc) over HwNic: 1 memory node + 2
#                     compute nodes as 3 processes, contended shared GCLs, invalidations by
#                     SEND/RECV; every op completes and every latch is free after the drain
#   3b. peer-gone   - a rank exits; verbs to it end in PeerGone, not a hang
#   3c. seam        - NIC seam extensions over HwNic (2 processes): masked atomics refused as
#                     Unsupported (rxe has none) + the explicit CAS-loop emulation; emulated
#                     device memory; unsignaled posts ordered on their QP; wait_word woken by a
#                     remote WRITE and timing out; the storage file round trip
#   4. scenario     - the real CLI: `dmsim hw run` of scenario files, one process per node,
#                     every point of each: nic-3node.json (NIC micro-benchmark, two points),
#                     selcc-3node.json (SELCC with `check`: rank 0 runs the history checkers
#                     on the merged per-node logs), selcc-3node-evict.json (the same under
#                     eviction pressure, checked), gam-3node.json (GAM SEQ and TSO), and
#                     selcc-1client.json (then compared with the simulator, step sim-vs-hw)
#   4b. stuck-client - fault injection: a client that never returns must end every rank with
#                     an error (watchdog + liveness probes), not a hang
#   5. latency      - this backend's READ/CAS latency (dmsim-hw-selftest calibrate) vs perftest
#                     ib_read_lat / ib_atomic_lat on the same device, alternating for a few
#                     rounds in the same VM run (same size, iterations and statistic: see
#                     hw/src/calibrate.rs); ratios per round and their median
# Prints "N passed, N failed" and the latency ratios; exit 0 iff all passed.
# If this host cannot run the VM (not x86_64 Linux, no root for the install, no qemu/kernel,
# install failure) it prints a line starting "SKIP:" and exits 0.
#
# Env: DMSIM_VM_CACHE (unpacked qemu/kernel; default hw/vm/.cache), DMSIM_HW_WORKSPACE (cargo
# workspace root; default the repo root), DMSIM_HW_ITERS (latency iterations, default 1000),
# DMSIM_HW_LAT_ROUNDS (latency rounds, default 3; hw/vm/latency.sh runs only this step),
# DMSIM_HW_SCENARIOS (scenario files for step 4, relative to the repo, 3 nodes each; empty
# skips the step; a file NAME.hwargs beside NAME.json holds extra `dmsim hw run` flags), DMSIM_VM_TIMEOUT (seconds, default 900).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WS=${DMSIM_HW_WORKSPACE:-$REPO}
ITERS=${DMSIM_HW_ITERS:-1000}
LAT_ROUNDS=${DMSIM_HW_LAT_ROUNDS:-3}
T0=$(date +%s)
log() { printf '[hw/vm/test %(%T)T] %s\n' -1 "$*" >&2; }
skip() { echo "SKIP: hw/vm/test.sh: $*"; exit 0; }

[ "$(uname -s)/$(uname -m)" = Linux/x86_64 ] || skip "needs x86_64 Linux (this is $(uname -s)/$(uname -m))"
if [ "$(id -u)" = 0 ]; then
  log "installing native dependencies"
  bash "$REPO/hw/scripts/install-deps.sh" >&2 || skip "hw/scripts/install-deps.sh failed (no package registry access?)"
else
  for c in pkg-config cpio busybox; do
    command -v $c >/dev/null || skip "not root and $c is missing: run hw/scripts/install-deps.sh as root"
  done
fi
CACHE=${DMSIM_VM_CACHE:-$HERE/.cache}
command -v qemu-system-x86_64 >/dev/null || [ -x "$CACHE/qemu-root/usr/bin/qemu-system-x86_64" ] ||
  skip "no qemu-system-x86_64 (install-deps did not provide one)"

log "building rdma binaries in $WS"
BUILD_LOG=$(mktemp)
# The test profile (the workspace sets opt-level 1 for it) for the binaries too: the latency
# comparison with perftest (C, -O2) is meaningless against an unoptimised build. One cargo
# invocation over the whole workspace, with a test target selected: cargo then resolves features
# as `cargo test --workspace` does (dev-dependencies included), so every crate but dmsim-hw and
# the CLI reuses the test build's units. `-p dmsim-hw --features rdma` alone resolved serde,
# libc and bitflags with fewer features and rebuilt the protocols, the engine and the report
# renderer twice (8 min here against 2 min).
RDMA_BUILD=(--profile test --workspace --features dmsim/rdma --test verbs)
if ! (cd "$WS" && cargo build "${RDMA_BUILD[@]}" --bin dmsim-hw-selftest --bin dmsim && cargo test --no-run "${RDMA_BUILD[@]}") >"$BUILD_LOG" 2>&1; then
  cat "$BUILD_LOG"; echo "0 passed, 1 failed"; echo "FAIL: build of dmsim-hw and the dmsim CLI with --features dmsim/rdma"; exit 1
fi
VERBS=$(sed -n 's/.*Executable tests\/verbs.rs (\(.*\))/\1/p' "$BUILD_LOG" | tail -1)
TARGET=$(cd "$WS" && cargo metadata --format-version 1 --no-deps 2>/dev/null | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
TARGET=${TARGET:-$WS/target}
SELFTEST=$TARGET/debug/dmsim-hw-selftest
[ -n "$VERBS" ] && [ -x "$WS/$VERBS" ] && VERBS=$WS/$VERBS
[ -x "$VERBS" ] && [ -x "$SELFTEST" ] || { echo "FAIL: test binaries not found ($VERBS, $SELFTEST)"; exit 1; }
ADDS=(-a "$VERBS:/opt/verbs" -a "$SELFTEST:/opt/selftest")
SCENARIOS=${DMSIM_HW_SCENARIOS-hw/vm/scenarios/nic-3node.json hw/vm/scenarios/selcc-3node.json hw/vm/scenarios/gam-3node.json hw/vm/scenarios/selcc-3node-evict.json hw/vm/scenarios/selcc-1client.json hw/vm/scenarios/sherman-3node.json hw/vm/scenarios/sherman-packed-3node.json hw/vm/scenarios/sherman-difache-3node.json hw/vm/scenarios/smart-3node.json hw/vm/scenarios/blink-3node.json hw/vm/scenarios/dex-3node.json hw/vm/scenarios/scalestore-3node.json hw/vm/scenarios/scalestore-3node-evict.json hw/vm/scenarios/dolphin-3node.json hw/vm/scenarios/difache-3node.json hw/vm/scenarios/difache-atomic-3node.json hw/vm/scenarios/difache-ford-3node.json hw/vm/scenarios/cmcache-3node.json}
if [ -n "$SCENARIOS" ]; then
  ADDS+=(-a "$TARGET/debug/dmsim:/opt/dmsim")
  for f in $SCENARIOS; do
    ADDS+=(-a "$REPO/$f:/opt/scenarios/$(basename "$f")")
    # A scenario's extra `dmsim hw run` flags, if it needs any (one line beside it).
    [ -f "$REPO/${f%.json}.hwargs" ] && ADDS+=(-a "$REPO/${f%.json}.hwargs:/opt/scenarios/$(basename "${f%.json}").hwargs")
  done
  ADDS+=(-a "$REPO/hw/vm/scenarios/faults/selcc-3node-stuck.json:/opt/faults/selcc-3node-stuck.json")
fi
log "built in $(( $(date +%s) - T0 ))s"

GUEST=$(mktemp)
cat > "$GUEST" <<'EOF'
export DMSIM_HW_DEVICE=$RXE_DEV DMSIM_HW_GID_INDEX=$RXE_GID DMSIM_JOB_SECRET=@SECRET@
fails=0
step() { # step NAME CMD...: runs CMD, prints @@ PASS/FAIL NAME
  name=$1; shift; echo "@@ RUN $name"; s=$(cut -d' ' -f1 /proc/uptime)
  if "$@"; then echo "@@ PASS $name ($(awk -v s=$s '{printf "%.1fs", $1-s}' /proc/uptime))"
  else echo "@@ FAIL $name rc=$?"; fails=$((fails+1)); fi
}
ranks() { # ranks SIZE PORT CMD...: SIZE processes of CMD --rank R --size SIZE --rendezvous
  size=$1; port=$2; shift 2; pids=; r=0
  while [ $r -lt $size ]; do
    timeout 240 "$@" --rank $r --size $size --rendezvous 127.0.0.1:$port -d $RXE_DEV -x $RXE_GID > /tmp/rank$r.log 2>&1 &
    pids="$pids $!"; r=$((r+1))
  done
  rc=0; for p in $pids; do wait $p || rc=1; done
  r=0; while [ $r -lt $size ]; do sed "s/^/  rank $r| /" /tmp/rank$r.log; r=$((r+1)); done
  return $rc
}
step verbs timeout 300 /opt/verbs --test-threads=1
step cluster ranks 3 7471 /opt/selftest cluster --mode counter --ops 40
step selcc ranks 3 7474 /opt/selftest cluster --mode selcc --ops 100 --threads 2 --read-ratio 0.5
step peer-gone ranks 2 7472 /opt/selftest cluster --mode peer-gone
step seam ranks 2 7473 /opt/selftest cluster --mode seam
if [ -x /opt/dmsim ]; then
  port=7480
  for f in /opt/scenarios/*.json; do
    name=scenario-$(basename $f .json); port=$((port+1))
    # Ask the CLI first whether it can run this protocol on hardware at all.
    if /opt/dmsim hw run $f --rank 0 --size 1 2>&1 | grep -q 'no hardware plan'; then
      echo "@@ SKIP $name: $(/opt/dmsim hw run $f --rank 0 --size 1 2>&1 | head -1)"
      continue
    fi
    field() { v=$(sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" $f | head -1); echo ${v:-0}; }
    n=$(( $(field memory_nodes) + $(field compute_nodes) + $(field symmetric_nodes) ))
    extra=$(cat ${f%.json}.hwargs 2>/dev/null)
    [ -n "$extra" ] && echo "  $name: extra flags $extra"
    step $name ranks $n $port /opt/dmsim hw run $f --out /tmp/out-$name $extra
    cat /tmp/out-$name/*.md 2>/dev/null | head -12
  done
fi
# Sim vs hardware: one client, deterministic op sequence. The protocol-level counts (ops, share
# of each access case, round trips per op by case) must be identical on both backends. Then the
# loop an operator runs: calibrate this device into a NIC profile, simulate the scenario on that
# profile, and put simulated and measured latencies side by side (`dmsim compare`).
if [ -x /opt/dmsim ] && [ -f /opt/scenarios/selcc-1client.json ]; then
  counts() { grep -E '"(ops|share_[a-z_]+|rt_[a-z_]+)":' "$1" | grep -v '_max"' | tr -d ' ,' | sort; }
  simhw() {
    /opt/dmsim run /opt/scenarios/selcc-1client.json --out /tmp/sim-1client >/dev/null 2>&1 || return 1
    [ -f /tmp/out-scenario-selcc-1client/summary.json ] || return 1
    counts /tmp/sim-1client/summary.json > /tmp/sim.counts
    counts /tmp/out-scenario-selcc-1client/summary.json > /tmp/hw.counts
    echo "  sim vs hw protocol counts (must match):"; paste /tmp/sim.counts /tmp/hw.counts | sed "s/^/  sim|hw  /"
    if /opt/dmsim hw calibrate -d $RXE_DEV -x $RXE_GID -n 300 --name rxe-vm --out /tmp/rxe-vm.json >/dev/null 2>&1; then
      sed 's|"nic_profile": *"[^"]*"|"nic_profile": "/tmp/rxe-vm.json"|' /opt/scenarios/selcc-1client.json > /tmp/selcc-1client-rxe.json
      /opt/dmsim run /tmp/selcc-1client-rxe.json --out /tmp/sim-1client-rxe >/dev/null 2>&1 || return 1
      echo "  simulated on the calibrated profile (/tmp/rxe-vm.json) vs measured:"
      /opt/dmsim compare /tmp/sim-1client-rxe /tmp/out-scenario-selcc-1client \
        --metrics latency_us_avg,throughput_mops,rt_per_op,cache_hit_ratio | sed 's/^/  sim|hw /'
    else
      echo "  sim|hw calibrate failed; latencies not compared"
    fi
    [ -s /tmp/sim.counts ] && cmp -s /tmp/sim.counts /tmp/hw.counts
  }
  step sim-vs-hw-counts simhw
fi
# The watchdog: a client that never returns (injected on rank 1) must end every rank with an
# error within seconds: rank 1 by --stall-timeout, ranks 0 and 2 because their liveness probes
# find rank 1 gone. A rank killed by the 60 s guard (exit 124) means something still hangs.
if [ -x /opt/dmsim ] && [ -f /opt/faults/selcc-3node-stuck.json ]; then
  stuck() {
    pids=; r=0
    while [ $r -lt 3 ]; do
      timeout 60 /opt/dmsim hw run /opt/faults/selcc-3node-stuck.json --stall-timeout 5 \
        --fault-stuck-client-on-rank 1 --rank $r --size 3 --rendezvous 127.0.0.1:7499 \
        -d $RXE_DEV -x $RXE_GID --out /tmp/out-stuck > /tmp/stuck$r.log 2>&1 &
      pids="$pids $!"; r=$((r+1))
    done
    ok=0; r=0
    for p in $pids; do
      wait $p; rc=$?
      echo "  rank $r| exit $rc: $(grep -m1 '^error' /tmp/stuck$r.log)"
      { [ $rc = 0 ] || [ $rc = 124 ] || [ $rc -gt 128 ]; } && ok=1
      r=$((r+1))
    done
    grep -q 'stalled: no client operation completed' /tmp/stuck1.log || ok=1
    return $ok
  }
  step stuck-client stuck
fi
lat() { # lat LABEL CMD...: perftest pair on rxe0, server in the background
  label=$1; shift
  timeout 120 "$@" > /tmp/srv.log 2>&1 & sp=$!; sleep 0.5
  timeout 120 "$@" $RXE_IP > /tmp/cli.log 2>&1; rc=$?
  wait $sp
  echo "@@ PERFTEST $label"; cat /tmp/cli.log; echo "@@ END"
  return $rc
}
# Latency: perftest and calibrate alternate for @LAT_ROUNDS@ rounds (the VM's timing drifts with
# the host's load; the host side compares within each round and reports the median ratio).
r=1
while [ $r -le @LAT_ROUNDS@ ]; do
  step ib_read_lat-$r lat "ib_read_lat $r" ib_read_lat -d $RXE_DEV -x $RXE_GID -s 8 -n @ITERS@
  step ib_atomic_lat-$r lat "ib_atomic_lat_cas $r" ib_atomic_lat -d $RXE_DEV -x $RXE_GID -A CMP_AND_SWAP -n @ITERS@
  echo "@@ CALIBRATE-ROUND $r"
  step calibrate-$r /opt/selftest calibrate -d $RXE_DEV -x $RXE_GID -n @ITERS@ --streams 2
  r=$((r+1))
done
echo "@@ failures: $fails"
[ $fails -eq 0 ]
EOF
# Every multi-rank run authenticates with a job secret, fresh per VM run.
sed -i "s/@ITERS@/$ITERS/g; s/@LAT_ROUNDS@/$LAT_ROUNDS/g; s/@SECRET@/$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')/" "$GUEST"

OUT=$(mktemp -d "${TMPDIR:-/tmp}/dmsim-hw-vm.XXXXXX")
log "booting the VM (output in $OUT)"
bash "$HERE/run-vm.sh" -o "$OUT" -t "${DMSIM_VM_TIMEOUT:-900}" "${ADDS[@]}" -- "$(cat "$GUEST")" > "$OUT/run.log" 2>&1
VMRC=$?
LOG=$OUT/console.log
[ -f "$LOG" ] || LOG=$OUT/run.log
grep -E '^(@@|  rank|  sim|    "|  latency|test |running|thread|called|rank|memory node|compute node)' "$LOG" | grep -v '^@@ PERFTEST' || true
if [ $VMRC = 3 ]; then
  tail -5 "$OUT/run.log"; skip "the VM could not be set up on this host (run-vm.sh exit 3; see $OUT/run.log)"
fi

# Latency comparison, per round: perftest's t_typical (median) and t_avg vs our p50 and mean
# (hw/src/calibrate.rs computes them the way perftest does). The perftest row is
# "#bytes #iterations t_min t_max t_typical t_avg ..."; our numbers are the CALIBRATE line.
echo "latency on rxe0 (TCG VM; µs)   dmsim-hw p50/mean   perftest typical/avg   ratio p50/typ, mean/avg"
awk '
  function ratio(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", a / b) : "n/a" }
  /^@@ PERFTEST/ { which = $3; round = $4; next }
  /^@@ END/ { which = "" }
  which != "" && $1 ~ /^[0-9]+$/ && NF >= 6 { typ[which] = $5; avg[which] = $6; next }
  /^@@ CALIBRATE-ROUND/ { round = $3; delete v; next }
  /^CALIBRATE/ {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] / 1000 }
    printf "READ 8B round %-2s            %6.1f/%-6.1f      %7s/%-7s         %s, %s\n", round, \
      v["read_p50_ns"], v["read_mean_ns"], typ["ib_read_lat"], avg["ib_read_lat"], \
      ratio(v["read_p50_ns"], typ["ib_read_lat"]), ratio(v["read_mean_ns"], avg["ib_read_lat"])
    printf "CAS round %-2s                %6.1f/%-6.1f      %7s/%-7s         %s, %s\n", round, \
      v["cas_p50_ns"], v["cas_mean_ns"], typ["ib_atomic_lat_cas"], avg["ib_atomic_lat_cas"], \
      ratio(v["cas_p50_ns"], typ["ib_atomic_lat_cas"]), ratio(v["cas_mean_ns"], avg["ib_atomic_lat_cas"])
  }' "$LOG" > "$OUT/latency.txt"
cat "$OUT/latency.txt"
median() { # median of the numbers on stdin
  sort -g | awk '{a[NR]=$1} END { if (NR == 0) print "n/a"; else if (NR % 2) print a[(NR+1)/2]; else printf "%.2f", (a[NR/2]+a[NR/2+1])/2 }'
}
for verb in READ CAS; do
  rows=$(grep "^$verb " "$OUT/latency.txt")
  echo "$verb median over rounds: ratio p50/typ $(echo "$rows" | awk '{print $(NF-1)}' | tr -d , | grep -v n/a | median), mean/avg $(echo "$rows" | awk '{print $NF}' | grep -v n/a | median)"
done

PASSED=$(grep -c '^@@ PASS' "$LOG"); FAILED=$(grep -c '^@@ FAIL' "$LOG"); SKIPPED=$(grep -c '^@@ SKIP' "$LOG")
[ $VMRC = 4 ] && { echo "guest timed out or panicked (see $LOG)"; FAILED=$((FAILED + 1)); }
echo "wall time $(( $(date +%s) - T0 ))s"
echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" = 0 ] && [ "$VMRC" = 0 ]
