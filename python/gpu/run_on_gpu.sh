#!/usr/bin/env bash
# On the GPU machine (Python 3.12 with torch and triton, no network), from the repository root:
#   python/gpu/run_on_gpu.sh [SECONDS] [KERNEL...]      KERNEL: triton, torch (default both)
#   VIA=campaign python/gpu/run_on_gpu.sh ...   through the real fuzzer instead: tools/campaign/campaign
#       --targets fuzz_gemm --python gpu_kernels:KERNEL in bound mode on device tensors (needs the
#       libFuzzer build carried in $MXDIFF_FUZZ_BUILD_DIR, default build-fuzz, with its runtime-libs/)
# The package: python/gpu/gpu_env.sh (the one carried in python/gpu/prebuilt/, else pip builds it
# here). Then fuzzes each kernel in bound mode for SECONDS (300)
# and prints executions per second, every finding and the probes. Exit 1 if any kernel has a
# finding, 2 if the package cannot be built or imported.
set -uo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-300}"
shift || true
kernels=("$@")
((${#kernels[@]})) || kernels=(triton torch)
source python/gpu/gpu_env.sh || exit 2
status=0
declare -A functions=([triton]=triton_dot_scaled [torch]=torch_dequant_matmul)
for kernel in "${kernels[@]}"; do
  if [ "${VIA:-package}" = campaign ]; then
    build="${MXDIFF_FUZZ_BUILD_DIR:-build-fuzz}"
    [ -x "$build/fuzz/fuzz_gemm" ] || { echo "run_on_gpu: VIA=campaign needs $build/fuzz/fuzz_gemm (the libFuzzer build, carried)" >&2; exit 2; }
    echo "run_on_gpu: campaign --python gpu_kernels:${functions[$kernel]} for $seconds s (bound mode, device tensors)"
    LD_LIBRARY_PATH="$PWD/$build/runtime-libs:${LD_LIBRARY_PATH:-}" MXDIFF_PYTHON_MODE=bound MXDIFF_PYTHON_DEVICE=cuda \
      MXDIFF_PYTHON_PATH="$PWD/python/gpu:${PYTHONPATH:-}" MXDIFF_PYTHON_TIMEOUT=120 \
      tools/campaign/campaign --targets fuzz_gemm --python "gpu_kernels:${functions[$kernel]}" --time "$seconds" \
      --build-dir "$build" --out out/gpu-campaign
  else
    echo "run_on_gpu: fuzzing $kernel for $seconds s (bound mode, mxdiff.check)"
    python3 python/gpu/fuzz_gpu.py --kernel "$kernel" --seconds "$seconds" --findings gpu-findings
  fi
  rc=$?
  ((rc == 0)) || status=$((rc > status ? rc : status))
done
exit "$status"
