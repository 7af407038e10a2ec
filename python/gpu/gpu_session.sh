#!/usr/bin/env bash
# ONE command on the GPU machine for issue 20's "Done when" (python/gpu/README.md), from the
# repository root, with python/gpu/prebuilt and build-fuzz (its runtime-libs/) carried:
#   python/gpu/gpu_session.sh [SECONDS=300] [BENCH_ROUNDS=3] [BENCH_REPEAT=2]
# 1. test_gpu_kernels.py: both kernels within the bound on cases with empty groups (on the GPU);
# 2. the Triton and the torch kernel through the real fuzzer at the same time, SECONDS each:
#    tools/campaign/campaign --targets fuzz_gemm --python gpu_kernels:FUNCTION, bound mode against
#    TRANSFORM (default mx-spec: the OCP MX spec's element values, the contract these kernels claim;
#    TRANSFORM=case: each case's SM70 transform, as before issue 37), device tensors, --keep-going
#    (a finding does not end the SECONDS: each cause is written once and its inputs counted); each
#    campaign's report (executions per second, findings) is printed;
# 3. the embedded Python module against the C ABI example kernel on the same cases, same run
#    (python/embed/bench_vs_c_abi.sh, every case of corpus/fuzz_gemm, real shapes included).
# STEPS="test campaign bench" (the default) picks steps; OUT (default out/gpu-session) holds the logs;
# BUDGET (580 s) bounds the whole command: the bench stops there, its finished rounds printed;
# MXDIFF_PYTHON_DEVICE=cpu tries the script on a machine without a GPU (torch on the CPU, Triton
# in its interpreter: slow, and not the numbers the issue asks for).
# Exit: the worst of the steps (0 clean, 1 a test failed or a finding, 2 cannot run, 3 a worker did
# not fuzz).
set -uo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-300}" rounds="${2:-3}" repeat="${3:-2}"
for value in "$seconds" "$rounds" "$repeat" "${BUDGET:-580}"; do
  [[ $value =~ ^[1-9][0-9]{0,5}$ ]] || {
    echo "gpu_session: '$value' is not a whole number of seconds or rounds in 1..999999" >&2; exit 2; }
done
started=$SECONDS
budget="${BUDGET:-580}"  # seconds for the whole command (the device machine's limit is 600): the bench gets what is left
steps="${STEPS:-test campaign bench}"
transform="${TRANSFORM:-mx-spec}"  # MXDIFF_PYTHON_TRANSFORM of the campaigns (python/README.md)
case "$transform" in mx-spec|case) ;; *) echo "gpu_session: TRANSFORM=$transform: mx-spec or case" >&2; exit 2 ;; esac
out="${OUT:-out/gpu-session}"
build="${MXDIFF_FUZZ_BUILD_DIR:-build-fuzz}"
source python/gpu/gpu_env.sh || exit 2
[ -x "$build/fuzz/fuzz_gemm" ] || { echo "gpu_session: needs $build/fuzz/fuzz_gemm (the libFuzzer build, carried)" >&2; exit 2; }
device="${MXDIFF_PYTHON_DEVICE:-cuda}"
if [ "$device" = cuda ] && ! python3 -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
  echo "gpu_session: torch sees no GPU here (MXDIFF_PYTHON_DEVICE=cpu to try the script without one)" >&2
  exit 2
fi
[ "$device" = cuda ] || export TRITON_INTERPRET=1 MXDIFF_GPU_KERNELS_DEVICE=cpu
mkdir -p "$out"
status=0
worst() { (($1 > status)) && status=$1; }
stamp() { echo "gpu_session: $(date -u +%H:%M:%S) $*"; }
export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
runtime="$PWD/$build/runtime-libs"

if [[ " $steps " == *" test "* ]]; then
  stamp "test_gpu_kernels.py"
  timeout 300 python3 -m pytest -q -p no:cacheprovider python/gpu/test_gpu_kernels.py 2>&1 | tail -n 25
  rc=${PIPESTATUS[0]}
  ((rc == 0)) || worst 1
fi

if [[ " $steps " == *" campaign "* ]]; then
  declare -A functions=([triton]=triton_dot_scaled [torch]=torch_dequant_matmul)
  pids=()
  for kernel in triton torch; do
    stamp "campaign --python gpu_kernels:${functions[$kernel]} for $seconds s (bound mode against $transform," \
      "$device tensors) -> $out/campaign-$kernel.log"
    rm -rf "$out/campaign-$kernel"
    LD_LIBRARY_PATH="$runtime:${LD_LIBRARY_PATH:-}" MXDIFF_PYTHON_MODE=bound MXDIFF_PYTHON_DEVICE="$device" \
      MXDIFF_PYTHON_TRANSFORM="$transform" \
      MXDIFF_PYTHON_PATH="$PWD/python/gpu:${PYTHONPATH:-}" MXDIFF_PYTHON_TIMEOUT=120 \
      tools/campaign/campaign --targets fuzz_gemm --python "gpu_kernels:${functions[$kernel]}" --time "$seconds" \
      --build-dir "$build" --out "$out/campaign-$kernel" --progress 60 --jobs 1 --keep-going \
      > "$out/campaign-$kernel.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1; do
    kernel=$([ $i = 0 ] && echo triton || echo torch)
    wait "${pids[$i]}"
    rc=$?
    worst "$rc"
    stamp "campaign $kernel: exit $rc; its log:"
    sed -n '/^target  *workers/,$p' "$out/campaign-$kernel.log" | head -n 80  # the report (all of it: the log)
  done
fi

if [[ " $steps " == *" bench "* ]]; then
  embed="$out/campaign-triton/python-embed"
  if [ ! -f "$embed/libmxdiff_python_kernel.so" ]; then
    embed="$out/python-embed"
    cmake -S python/embed -B "$embed" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v python3)" >/dev/null &&
      cmake --build "$embed" >/dev/null || { echo "gpu_session: python/embed did not build" >&2; exit 2; }
  fi
  stamp "bench: embedded Python (example_kernels:reference) vs the C ABI example kernel, $rounds rounds x $repeat"
  left=$((budget - (SECONDS - started)))
  if ((left < 30)); then
    stamp "bench skipped: $left s left of BUDGET=$budget (STEPS=bench runs it alone)"
    worst 2
  else
    LD_LIBRARY_PATH="$runtime:${LD_LIBRARY_PATH:-}" CASES=all MXDIFF_MODULES=external \
      timeout "$left" python/embed/bench_vs_c_abi.sh "$build" "$embed" "$rounds" "$repeat"
    rc=$?
    ((rc == 124)) && stamp "bench stopped at BUDGET=$budget s: the rounds above are complete ones"
    ((rc == 0)) || worst 2
  fi
fi
stamp "done, exit $status"
exit "$status"
