#!/usr/bin/env bash
# On the GPU machine: how long `tools/campaign/campaign --targets fuzz_gemm` takes to find each planted
# kernel defect (tools/gpu/build_planted.sh builds them), and that main's own build finds nothing in
# the same time (the baseline, first). fuzz/README.md: "Planted kernel defects".
#   tools/gpu/run_planted.sh FUZZ_BUILD_DIR PLANTED_DIR [NAME...]
# FUZZ_BUILD_DIR: main's libFuzzer build (FUZZ_BUILD_DIR/fuzz/fuzz_gemm; its runtime-libs/ goes on
# LD_LIBRARY_PATH): device-build/planted/baseline of build_planted.sh's archive (built with the
# defects, from the same commit), or device-build/fuzz of tools/gpu/pack_for_device.sh's. PLANTED_DIR:
# the planted builds, PLANTED_DIR/NAME/fuzz/fuzz_gemm: device-build/planted/defects.
# Run it in a checkout of the commit they were built from (the campaign reads corpus/fuzz_gemm there).
# NAME...: only these defects (default: every one in PLANTED_DIR).
# Environment: MXDIFF_PLANTED_TIME (seconds per campaign, default 60), MXDIFF_WORKERS_PER_GPU (default
# 1), MXDIFF_CPU_CHECK_EVERY (default 16), OUT (logs; default ./planted-out), MXDIFF_PLANTED_CAMPAIGN_ARGS
# (more campaign arguments, split on spaces: the CPU test runs the kit with `--external LIB --jobs 1`),
# MXDIFF_PLANTED_REPEATS (campaigns per defect, default 1; the baseline runs once; a line each, NAME#i).
#
# Each campaign runs as `campaign --build-dir DIR --targets fuzz_gemm --time T --no-merge`; the clock
# starts just before the command, so start-up (calibration guard, known cases, corpus load) is in
# the time. The first finding is the first .txt in the campaign's findings folder (fuzz_gemm writes
# it before it aborts); the campaign is then stopped (its merge would only replay the defect again).
# One line per campaign:
#   planted <name>: found in <s> s, <signature>, executions <n>
#   planted <name>: no finding in <T> s (<wall> s wall), executions <n>
# Executions: exact where the finding's input sequence (the 32 inputs before it) holds all of them,
# else the worker's count from its stats file (rewritten once a second) or libFuzzer's log, whichever
# is larger ("about"). 0 executions: a known case found it at start-up.
# Exit status: 0 the baseline is clean and every defect was found; 1 otherwise; 2 bad usage.
set -uo pipefail
if (($# < 2)); then
  echo "usage: $0 FUZZ_BUILD_DIR PLANTED_DIR [NAME...]" >&2
  exit 2
fi
fuzz_build=$1 planted=$2
shift 2
[ -x "$fuzz_build/fuzz/fuzz_gemm" ] || { echo "$0: no $fuzz_build/fuzz/fuzz_gemm" >&2; exit 2; }
[ -d "$planted" ] || { echo "$0: $planted is not a directory" >&2; exit 2; }
if (($# == 0)); then
  mapfile -t names < <(cd "$planted" && for d in */; do [ -x "$d/fuzz/fuzz_gemm" ] && echo "${d%/}"; done)
else
  names=("$@")
fi
((${#names[@]} > 0)) || { echo "$0: no PLANTED_DIR/NAME/fuzz/fuzz_gemm in $planted" >&2; exit 2; }
for name in "${names[@]}"; do
  [ -x "$planted/$name/fuzz/fuzz_gemm" ] || { echo "$0: no $planted/$name/fuzz/fuzz_gemm" >&2; exit 2; }
done
time_s=${MXDIFF_PLANTED_TIME:-60}
workers=${MXDIFF_WORKERS_PER_GPU:-1}
cpu_check=${MXDIFF_CPU_CHECK_EVERY:-16}
extra=${MXDIFF_PLANTED_CAMPAIGN_ARGS:-}
repeats=${MXDIFF_PLANTED_REPEATS:-1}
[[ $repeats =~ ^[1-9][0-9]?$ ]] || { echo "$0: MXDIFF_PLANTED_REPEATS '$repeats' is not 1..99" >&2; exit 2; }
[[ $time_s =~ ^[1-9][0-9]*$ ]] || { echo "$0: MXDIFF_PLANTED_TIME '$time_s' is not a positive number of seconds" >&2; exit 2; }
read -ra extra_args <<<"$extra"
out=$(mkdir -p "${OUT:-planted-out}" && cd "${OUT:-planted-out}" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
fuzz_build=$(cd "$fuzz_build" && pwd)
planted=$(cd "$planted" && pwd)
export LD_LIBRARY_PATH="$fuzz_build/runtime-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
note "planted defects: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo "no nvidia-smi")," \
  "campaign --targets fuzz_gemm --time $time_s --workers-per-gpu $workers --cpu-check-every $cpu_check${extra:+ $extra}"

# first PATH...: the first of the paths (a glob's expansion) that exists, else nothing.
first() {
  local path
  for path in "$@"; do
    [ -e "$path" ] && { echo "$path"; return; }
  done
}

# executions WORK FINDING_TXT LOG: the count the line reports (see the header).
executions() {
  local work=$1 txt=$2 log=$3 before stats logged
  if [ -n "$txt" ]; then
    before=$(sed -n 's/^sequence: .* (\([0-9]*\) inputs this worker ran before it, then it)$/\1/p' "$txt" | head -1)
    # No sequence: the first input, or a known case in the initialization (before libFuzzer's seed line).
    if [ -z "$before" ]; then
      if awk '/==mxdiff== FINDING/ {print "known"; exit} /^INFO: Seed:/ {print "fuzzing"; exit}' "$log" |
        grep -q known; then
        echo "0 (a known case, at start-up)"
      else
        echo 1
      fi
      return
    fi
    if ((before < 32)); then echo $((before + 1)); return; fi
  fi
  stats=$(cat "$work"/*/fuzz_gemm/stats-w*.txt 2>/dev/null | awk '$1 == "cases" {s += $2} END {print s + 0}')
  logged=$(cat "$work"/*/fuzz_gemm/worker*.log 2>/dev/null | sed -n 's/^#\([0-9][0-9]*\)[[:space:]].*/\1/p' | sort -n | tail -1)
  logged=${logged:-0}
  echo "about $((stats > logged ? stats : logged))"
}

# one NAME BUILD_DIR: one campaign, one line.
one() {
  local name=$1 build=$2 work=$out/${1//#/-run} start pid found="" elapsed
  rm -rf "$work"
  mkdir -p "$work"
  start=$(date +%s.%N)
  setsid "$repo/tools/campaign/campaign" --build-dir "$build" --targets fuzz_gemm --time "$time_s" \
    --workers-per-gpu "$workers" --cpu-check-every "$cpu_check" --no-merge --progress 0 --out "$work" "${extra_args[@]}" \
    >"$work/campaign.log" 2>&1 &
  pid=$!
  # The campaign itself stops a worker at --time (+10 s, SIGKILL +5 s); the merge is not waited for.
  local deadline=$((time_s + 20))
  while kill -0 "$pid" 2>/dev/null; do
    found=$(first "$work"/*/fuzz_gemm/findings/*.txt)
    [ -n "$found" ] && break
    awk -v a="$(date +%s.%N)" -v b="$start" -v d="$deadline" 'BEGIN {exit !(a - b >= d)}' && break
    # The worker has ended (its time is up, or it stopped) and no finding came: the campaign merges now.
    if grep -q "merging the new inputs" "$work/campaign.log" 2>/dev/null; then
      sleep 0.5
      found=$(first "$work"/*/fuzz_gemm/findings/*.txt)
      break
    fi
    sleep 0.1
  done
  elapsed=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN {printf "%.1f", a - b}')
  [ -z "$found" ] && found=$(first "$work"/*/fuzz_gemm/findings/*.txt)
  kill -TERM -- "-$pid" 2>/dev/null
  sleep 2
  kill -KILL -- "-$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  local log
  log=$(first "$work"/*/fuzz_gemm/worker0.log)
  if [ -n "$found" ]; then
    local signature
    signature=$(sed -n 's/^signature: //p' "$found" | head -1)
    note "$(printf 'planted %-16s found in %6.1f s, %s, executions %s' "$name:" "$elapsed" "$signature" \
      "$(executions "$work" "$found" "${log:-/dev/null}")")"
    return 0
  fi
  if [ -z "$log" ] || ! grep -q "INITED" "$log"; then
    note "$(printf 'planted %-16s DID NOT FUZZ (%.1f s): %s (%s)' "$name:" "$elapsed" \
      "$(grep -v '^campaign: interrupted' "$work/campaign.log" | tail -1)" "$work/campaign.log")"
    return 2
  fi
  note "$(printf 'planted %-16s no finding in %s s (%.1f s wall), executions %s' "$name:" "$time_s" "$elapsed" \
    "$(executions "$work" "" "$log")")"
  return 1
}

failed=0
one baseline "$fuzz_build"
rc=$?
if ((rc == 0)); then
  note "the baseline (main) has a finding: the planted timings below are not of the planted defects alone"
  failed=1
elif ((rc == 2)); then
  failed=1
fi
for name in "${names[@]}"; do
  for ((run = 1; run <= repeats; run++)); do
    label=$name
    ((repeats > 1)) && label="$name#$run"
    one "$label" "$planted/$name" || failed=1
  done
done
note "logs: $out"
exit $failed
