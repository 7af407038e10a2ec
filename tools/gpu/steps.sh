# shellcheck shell=bash disable=SC2154,SC2034  # $summary and $failed belong to the sourcing script
# Sourced by the GPU scripts (run_gpu_suite.sh, run_throughput.sh): their summary and steps.
# Needs: $summary (the summary file), $failed (set to 1 when a step fails) and, optionally,
# $step_width (the name column's width in the summary, default 22).

# note TEXT...: prints TEXT and appends it to the summary.
note() { echo "$*" | tee -a "$summary"; }

# step NAME LOG TIMEOUT_S COMMAND...: runs, appends to LOG, records the exit status.
step() {
  local name=$1 log=$2 limit=$3
  shift 3
  local start=$SECONDS
  echo "=== $name: $*" >>"$log"
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  ((rc == 0)) || failed=1
  note "$(printf "%-${step_width:-22}s rc %-3s %4ss" "$name" "$rc" $((SECONDS - start)))"
  return $rc
}
