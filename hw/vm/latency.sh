#!/bin/bash
# latency.sh - this backend's READ/CAS latency against perftest, several rounds in ONE Soft-RoCE
# VM boot (the latency step of hw/vm/test.sh, repeated, so that run-to-run noise shows).
#
# usage: hw/vm/latency.sh [ROUNDS]          (default 5)
# Each round runs, on rxe0: ib_read_lat -s 8 -n ITERS, ib_atomic_lat -A CMP_AND_SWAP -n ITERS,
# then `dmsim-hw-selftest calibrate -n ITERS --streams 2` once per variant. Prints one line per
# round and variant with perftest's t_typical/t_avg, our p50/mean, and the ratios
# (p50/typical, mean/avg), then the median ratio over the rounds. See hw/src/calibrate.rs for
# how calibrate's statistic corresponds to perftest's.
#
# Env: DMSIM_HW_ITERS (iterations per measurement, default 1000, as test.sh);
#   DMSIM_LAT_VARIANTS: space-separated calibrate variants, each "-" (no extra environment) or
#     comma-separated VAR=VALUE pairs given to the calibrate process, e.g.
#     "- DMSIM_HW_SPIN_US=0" compares the default with inline CQ spinning off; default "-";
#     the variant "base" runs DMSIM_LAT_BASELINE instead (another build, e.g. of an older
#     commit, to compare in the same boot);
#   DMSIM_LAT_SELFTEST: a prebuilt dmsim-hw-selftest to use instead of building one;
#   DMSIM_VM_TIMEOUT (default ROUNDS*60+120), DMSIM_VM_CACHE and CARGO_TARGET_DIR as for
#   hw/vm/test.sh (run that once first: it installs the VM's dependencies).
# Wrap in `flock /tmp/dmsim-vm.lock` on shared machines: one VM at a time.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
ROUNDS=${1:-5}
ITERS=${DMSIM_HW_ITERS:-1000}
VARIANTS=${DMSIM_LAT_VARIANTS:--}
log() { printf '[hw/vm/latency %(%T)T] %s\n' -1 "$*" >&2; }
T0=$(date +%s)
SELFTEST=${DMSIM_LAT_SELFTEST:-}
if [ -z "$SELFTEST" ]; then
  log "building dmsim-hw-selftest with --features rdma (test profile, as test.sh)"
  (cd "$REPO" && cargo build --profile test --workspace --features dmsim/rdma --test verbs --bin dmsim-hw-selftest) >&2 || { echo "build failed"; exit 1; }
  TARGET=$(cd "$REPO" && cargo metadata --format-version 1 --no-deps 2>/dev/null | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  SELFTEST=${TARGET:-$REPO/target}/debug/dmsim-hw-selftest
fi
[ -x "$SELFTEST" ] || { echo "no selftest binary $SELFTEST"; exit 1; }
ADDS=(-a "$SELFTEST:/opt/selftest")
[ -n "${DMSIM_LAT_BASELINE:-}" ] && ADDS+=(-a "$DMSIM_LAT_BASELINE:/opt/selftest-base")
GUEST=$(mktemp)
printf 'ROUNDS=%s ITERS=%s VARIANTS="%s"\n' "$ROUNDS" "$ITERS" "$VARIANTS" > "$GUEST"
cat >> "$GUEST" <<'EOF'
lat() { # lat NAME CMD...: perftest pair on rxe0, server in the background
  name=$1; shift
  timeout 120 "$@" > /tmp/srv.log 2>&1 & sp=$!; sleep 0.5
  timeout 120 "$@" $RXE_IP > /tmp/cli.log 2>&1
  wait $sp
  echo "@@ PERFTEST $name"; grep -E '^ *[0-9]+ +[0-9]+ ' /tmp/cli.log; echo "@@ END"
}
k=1
while [ $k -le $ROUNDS ]; do
  echo "@@ ROUND $k"
  lat read ib_read_lat -d $RXE_DEV -x $RXE_GID -s 8 -n $ITERS
  lat cas ib_atomic_lat -d $RXE_DEV -x $RXE_GID -A CMP_AND_SWAP -n $ITERS
  for v in $VARIANTS; do
    vars=$(echo "$v" | tr ',' ' '); bin=/opt/selftest
    [ "$v" = - ] && vars=; [ "$v" = base ] && { vars=; bin=/opt/selftest-base; }
    echo "@@ CAL $v"
    env $vars timeout 120 $bin calibrate -d $RXE_DEV -x $RXE_GID -n $ITERS --streams 2 > /tmp/cal.log 2>&1
    grep -E '^(READ|CAS|WRITE|FAA|CALIBRATE)' /tmp/cal.log || tail -5 /tmp/cal.log
  done
  k=$((k+1))
done
echo "@@ DONE"
EOF
OUT=$(mktemp -d "${TMPDIR:-/tmp}/dmsim-lat.XXXXXX")
log "booting the VM ($ROUNDS rounds, variants: $VARIANTS; output in $OUT)"
bash "$HERE/run-vm.sh" -o "$OUT" -t "${DMSIM_VM_TIMEOUT:-$((ROUNDS * 60 + 120))}" \
  "${ADDS[@]}" -- "$(cat "$GUEST")" > "$OUT/run.log" 2>&1
VMRC=$?
LOG=$OUT/console.log
[ -f "$LOG" ] || { tail -20 "$OUT/run.log"; exit 1; }
grep -E '^(@@ (ROUND|CAL)|READ|CAS |CAS\+|WRITE|FAA)' "$LOG" | grep -v '^@@ PERFTEST'
# perftest row: #bytes #iterations t_min t_max t_typical t_avg ...; CALIBRATE line: key=value.
awk '
  function ratio(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", a / b) : "n/a" }
  /^@@ ROUND/ { round = $3 }
  /^@@ PERFTEST/ { which = $3; next }
  which != "" && $1 ~ /^[0-9]+$/ { typ[which] = $5; avg[which] = $6; which = ""; next }
  /^@@ CAL / { variant = $3; next }
  /^CALIBRATE/ {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] / 1000 }
    printf "round %s %-24s READ %.1f/%.1f vs %s/%s ratio %s, %s   CAS %.1f/%.1f vs %s/%s ratio %s, %s\n", \
      round, variant, v["read_p50_ns"], v["read_mean_ns"], typ["read"], avg["read"], \
      ratio(v["read_p50_ns"], typ["read"]), ratio(v["read_mean_ns"], avg["read"]), \
      v["cas_p50_ns"], v["cas_mean_ns"], typ["cas"], avg["cas"], \
      ratio(v["cas_p50_ns"], typ["cas"]), ratio(v["cas_mean_ns"], avg["cas"])
  }' "$LOG" | tee "$OUT/ratios.txt"
# Per variant: the median over rounds of each ratio; then the ratio of the medians over rounds,
# and of the minimums (the host's load switches the VM between a fast and a slow regime every
# few seconds, independently for perftest's run and ours, so per-round ratios scatter widely).
col() { grep " $1 " "$OUT/ratios.txt" | awk -v f="$2" '{print $f}' | tr -d ','; }
median() { sort -g | awk '{a[NR]=$1} END { if (NR == 0) print "n/a"; else if (NR % 2) print a[(NR+1)/2]; else printf "%.2f", (a[NR/2]+a[NR/2+1])/2 }'; }
minimum() { sort -g | head -1; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "n/a" }'; }
for v in $VARIANTS; do
  echo "variant $v, median of the per-round ratios: READ p50/typ $(col "$v" 9 | median) mean/avg $(col "$v" 10 | median)   CAS p50/typ $(col "$v" 16 | median) mean/avg $(col "$v" 17 | median)"
  for stat in median minimum; do
    ours() { col "$v" "$1" | cut -d/ -f"$2" | $stat; }
    r50=$(div "$(ours 5 1)" "$(ours 7 1)"); rmean=$(div "$(ours 5 2)" "$(ours 7 2)")
    c50=$(div "$(ours 12 1)" "$(ours 14 1)"); cmean=$(div "$(ours 12 2)" "$(ours 14 2)")
    echo "variant $v, ratio of the ${stat}s over rounds: READ p50/typ $r50 mean/avg $rmean   CAS p50/typ $c50 mean/avg $cmean"
  done
done
echo "vm rc=$VMRC, wall time $(( $(date +%s) - T0 ))s; log $LOG"
[ $VMRC = 0 ]
