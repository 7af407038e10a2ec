#include "kernels/mma_probe.h"

#include <cuda_runtime_api.h>

#include "fmt/core.h"
#include "kernels/cuda_status.h"
#include "kernels/mma_probe_kernel.h"
#include "reference/status_macros.h"

namespace mxdiff {
namespace {

// Device buffers of one probe run, freed on every path.
struct ProbeBuffers {
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  void* d = nullptr;
  void* arch = nullptr;
  ~ProbeBuffers() {
    for (void* pointer : {a, b, c, d, arch}) cudaFree(pointer);
  }
};

}  // namespace

absl::StatusOr<MmaProbeResult> RunMmaProbe(const MmaProbeInput& input, int device) {
  if (input.warps < 1 || input.steps < 1 || input.warps > 1 << 20 || input.steps > 1 << 16) {
    return absl::InvalidArgumentError(
        fmt::format("probe needs 1..2^20 warps and 1..2^16 steps, got {} and {}", input.warps, input.steps));
  }
  const size_t operand = size_t(input.warps) * input.steps * kWarpLanes * kMmaAElements;
  const size_t accumulators = size_t(input.warps) * kWarpLanes * kMmaAccumulators;
  if (input.a.size() != operand || input.b.size() != operand || input.c.size() != accumulators) {
    return absl::InvalidArgumentError(fmt::format("probe operands: A {} B {} C {} elements, need {} {} {}",
                                                  input.a.size(), input.b.size(), input.c.size(), operand,
                                                  operand, accumulators));
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
    cudaGetLastError();
    return absl::UnavailableError(fmt::format("no CUDA device {} ({} found)", device, count));
  }
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "cudaSetDevice"));
  ProbeBuffers buffers;
  const size_t operand_bytes = operand * sizeof(uint16_t);
  const size_t accumulator_bytes = accumulators * sizeof(uint32_t);
  for (auto [pointer, bytes] : {std::pair{&buffers.a, operand_bytes}, std::pair{&buffers.b, operand_bytes},
                                std::pair{&buffers.c, accumulator_bytes}, std::pair{&buffers.d, accumulator_bytes},
                                std::pair{&buffers.arch, sizeof(int)}}) {
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMalloc(pointer, bytes), "cudaMalloc"));
  }
  if (absl::Status s = CudaStatus(cudaMemcpy(buffers.a, input.a.data(), operand_bytes, cudaMemcpyHostToDevice),
                                  "copy A");
      !s.ok())
    return s;
  if (absl::Status s = CudaStatus(cudaMemcpy(buffers.b, input.b.data(), operand_bytes, cudaMemcpyHostToDevice),
                                  "copy B");
      !s.ok())
    return s;
  if (absl::Status s = CudaStatus(
          cudaMemcpy(buffers.c, input.c.data(), accumulator_bytes, cudaMemcpyHostToDevice), "copy C");
      !s.ok())
    return s;
  if (absl::Status s = CudaStatus(
          LaunchMmaProbeKernel(input.warps, input.steps, static_cast<const uint16_t*>(buffers.a),
                               static_cast<const uint16_t*>(buffers.b), static_cast<const uint32_t*>(buffers.c),
                               static_cast<uint32_t*>(buffers.d), static_cast<int*>(buffers.arch)),
          "probe launch");
      !s.ok())
    return s;
  MmaProbeResult result;
  result.d.resize(accumulators);
  if (absl::Status s = CudaStatus(
          cudaMemcpy(result.d.data(), buffers.d, accumulator_bytes, cudaMemcpyDeviceToHost), "copy D");
      !s.ok())
    return s;
  if (absl::Status s = CudaStatus(
          cudaMemcpy(&result.device_arch, buffers.arch, sizeof(int), cudaMemcpyDeviceToHost), "copy arch");
      !s.ok())
    return s;
  return result;
}

}  // namespace mxdiff
