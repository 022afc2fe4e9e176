#!/bin/bash
# repeat.sh - run `dmsim hw run` of one 3-node scenario N times in ONE Soft-RoCE VM boot, to
# catch rare hangs on real verbs (e.g. hw/vm/scenarios/selcc-3node-evict.json, which hung once
# in three runs before the memorised-message fix in protocols/src/selcc).
#
# usage: hw/vm/repeat.sh SCENARIO [RUNS] [PER_RUN_TIMEOUT_S]
#   SCENARIO  a scenario file, absolute or relative to the repo (3 nodes: ranks 0..2 on rxe0)
#   RUNS      default 5; PER_RUN_TIMEOUT_S default 90 (a hung run is killed and reported HANG)
# Prints one "@@ PASS run K (Ts)" / "@@ FAIL run K rc=R (Ts)" / "@@ HANG run K" line per run,
# then "N passed, N failed"; on a failure or hang, the last lines of every rank's log.
# Env: DMSIM_REPEAT_POINTS=n makes run k use --point (k-1)%n (e.g. a scenario with
# "run": {"seeds": n} gives each run its own workload seed), DMSIM_REPEAT_GREP=ERE prints, per run, how many lines of each rank's log match (and
# the first few; for debug prints), DMSIM_REPEAT_BIN=path runs that dmsim binary (built with --features rdma) instead of
# building one, DMSIM_REPEAT_TRACE=1 runs the ranks with DMSIM_HW_TRACE=1 (one stderr line per verb
# batch and message; only the tail is printed; DMSIM_REPEAT_TRACE=ring or ring:N keeps the lines in
# memory and prints them at the end or at a stall, which hides fewer races), DMSIM_REPEAT_DUMP=1 copies a failing run's full rank logs
# out of the VM (gzip+base64 on the console) into the output directory, DMSIM_REPEAT_ARGS='…' adds
# arguments to every `dmsim hw run` (e.g. --stall-timeout 20), DMSIM_VM_TIMEOUT (whole VM, default
# RUNS*(PER_RUN_TIMEOUT_S+10)+120), CARGO_TARGET_DIR as for cargo. Needs what hw/vm/test.sh
# needs (run that once first: it installs the VM's dependencies). Wrap in
# `flock /tmp/dmsim-vm.lock` on shared machines: one VM at a time.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SCENARIO=${1:?usage: hw/vm/repeat.sh SCENARIO [RUNS] [PER_RUN_TIMEOUT_S]}
RUNS=${2:-5}
PER=${3:-90}
case $SCENARIO in /*) ;; *) SCENARIO=$REPO/$SCENARIO ;; esac
[ -f "$SCENARIO" ] || { echo "no scenario $SCENARIO"; exit 2; }
log() { printf '[hw/vm/repeat %(%T)T] %s\n' -1 "$*" >&2; }
T0=$(date +%s)
if [ -n "${DMSIM_REPEAT_BIN:-}" ]; then
  BIN=$DMSIM_REPEAT_BIN
else
  log "building dmsim with --features rdma"
  (cd "$REPO" && cargo build --profile test --workspace --features dmsim/rdma --test verbs --bin dmsim) >&2 || { echo "build failed"; exit 1; }
  TARGET=$(cd "$REPO" && cargo metadata --format-version 1 --no-deps 2>/dev/null | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  BIN=${TARGET:-$REPO/target}/debug/dmsim
fi
GUEST=$(mktemp)
cat > "$GUEST" <<EOF
RUNS=$RUNS PER=$PER TRACE=${DMSIM_REPEAT_TRACE:-0} PATTERN='${DMSIM_REPEAT_GREP:-}' POINTS=${DMSIM_REPEAT_POINTS:-1} DUMP=${DMSIM_REPEAT_DUMP:-0} EXTRA='${DMSIM_REPEAT_ARGS:-}'
EOF
cat >> "$GUEST" <<'EOF'
f=/opt/scenario.json; pass=0; fail=0; k=1
[ "$TRACE" != 0 ] && export DMSIM_HW_TRACE=$TRACE
export DMSIM_JOB_SECRET=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
while [ $k -le $RUNS ]; do
  s=$(cut -d' ' -f1 /proc/uptime); pids=; r=0
  while [ $r -lt 3 ]; do
    timeout -s KILL $PER /opt/dmsim hw run $f --point $(( (k - 1) % POINTS )) --rank $r --size 3 --rendezvous 127.0.0.1:$((7600 + k)) \
      -d $RXE_DEV -x $RXE_GID --out /tmp/out-$k $EXTRA > /tmp/rank$r.log 2>&1 &
    pids="$pids $!"; r=$((r+1))
  done
  rc=0; for p in $pids; do wait $p || rc=$?; done
  t=$(awk -v s=$s '{printf "%.1fs", $1-s}' /proc/uptime)
  if [ $rc = 0 ]; then echo "@@ PASS run $k point $(( (k - 1) % POINTS )) ($t)"; pass=$((pass+1))
  else
    [ $rc = 137 ] && echo "@@ HANG run $k point $(( (k - 1) % POINTS )) (killed after ${PER}s)" || echo "@@ FAIL run $k point $(( (k - 1) % POINTS )) rc=$rc ($t)"
    fail=$((fail+1))
    for r in 0 1 2; do echo "  --- rank $r: $(wc -l < /tmp/rank$r.log) lines, last 40:"; tail -40 /tmp/rank$r.log | sed "s/^/  rank $r| /"; done
    # The device's counters (retransmissions, duplicate requests) since boot, for the record.
    for c in /sys/class/infiniband/$RXE_DEV/ports/1/hw_counters/*; do echo "  counter $(basename $c) $(cat $c)"; done 2>/dev/null
    if [ "$DUMP" = 1 ]; then
      echo "@@DUMP-BEGIN $k"; (cd /tmp && busybox tar c rank0.log rank1.log rank2.log | busybox gzip -9 | busybox base64); echo "@@DUMP-END $k"
    fi
  fi
  grep -h -E '^(ops|latches_held_at_end|throughput|latency_us_avg)' /tmp/rank0.log | sed 's/^/  /'
  if [ -n "$PATTERN" ]; then
    for r in 0 1 2; do
      n=$(grep -c -E "$PATTERN" /tmp/rank$r.log); [ "$n" -gt 0 ] || continue
      echo "  rank $r: $n lines match $PATTERN, first 5:"; grep -E "$PATTERN" /tmp/rank$r.log | head -5 | sed "s/^/  rank $r| /"
    done
  fi
  k=$((k+1))
done
echo "@@ $pass passed, $fail failed"
for c in /sys/class/infiniband/$RXE_DEV/ports/1/hw_counters/*; do echo "  counter $(basename $c) $(cat $c)"; done 2>/dev/null
[ $fail = 0 ]
EOF
OUT=$(mktemp -d "${TMPDIR:-/tmp}/dmsim-repeat.XXXXXX")
log "booting the VM ($RUNS runs of $SCENARIO, ${PER}s each; output in $OUT)"
bash "$HERE/run-vm.sh" -o "$OUT" -t "${DMSIM_VM_TIMEOUT:-$((RUNS * (PER + 10) + 120))}" \
  -a "$BIN:/opt/dmsim" -a "$SCENARIO:/opt/scenario.json" -- "$(cat "$GUEST")" > "$OUT/run.log" 2>&1
VMRC=$?
grep -E '^(@@|  )' "$OUT/console.log" 2>/dev/null | grep -v '^@@DUMP' || tail -20 "$OUT/run.log"
for k in $(sed -n 's/^@@DUMP-BEGIN \([0-9]*\).*/\1/p' "$OUT/console.log" 2>/dev/null); do
  sed -n "/^@@DUMP-BEGIN $k/,/^@@DUMP-END $k/p" "$OUT/console.log" | sed '1d;$d' | tr -d '\r' | base64 -d > "$OUT/logs-run$k.tar.gz" &&
    echo "run $k: the ranks' full logs are in $OUT/logs-run$k.tar.gz"
done
echo "vm rc=$VMRC, wall time $(( $(date +%s) - T0 ))s"
[ $VMRC = 0 ]
