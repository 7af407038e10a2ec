// Host side of the device reference: validation (the CPU reference's rules), device memory,
// copies, and CUDA errors as absl::Status.
#include "reference/device/device_reference.h"

#include <cuda_runtime.h>

#include <string>

#include "fmt/core.h"
#include "reference/device/device_launch.h"
#include "reference/fp16.h"

namespace mxdiff {
namespace {

absl::Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = fmt::format("device reference: {}: {}", what, cudaGetErrorString(error));
  cudaGetLastError();  // clear a non-sticky error for the next call
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) return absl::UnavailableError(message);
  return absl::InternalError(message);
}

// Device memory for `count` values of T, freed on every path out.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }

  absl::Status Allocate(size_t count) {
    return CudaStatus(cudaMalloc(&data_, count == 0 ? 1 : count * sizeof(T)), "cudaMalloc");
  }
  absl::Status Upload(std::span<const T> values) {
    if (absl::Status status = Allocate(values.size()); !status.ok()) return status;
    if (values.empty()) return absl::OkStatus();
    return CudaStatus(cudaMemcpy(data_, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice),
                      "cudaMemcpy to the device");
  }
  absl::Status Download(std::vector<T>& values) const {
    if (values.empty()) return absl::OkStatus();
    return CudaStatus(cudaMemcpy(values.data(), data_, values.size() * sizeof(T), cudaMemcpyDeviceToHost),
                      "cudaMemcpy from the device");
  }
  T* get() const { return data_; }

 private:
  T* data_ = nullptr;
};

absl::Status RequireDevice() {
  std::string why;
  if (!DeviceReferenceAvailable(&why)) return absl::UnavailableError("device reference: " + why);
  return absl::OkStatus();
}

}  // namespace

bool DeviceReferenceAvailable(std::string* why) {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    if (why != nullptr) *why = error != cudaSuccess ? cudaGetErrorString(error) : "no CUDA device found";
    cudaGetLastError();
    return false;
  }
  return true;
}

absl::Status DeviceReferenceGemmF32(const GroupedProblem& problem, const ReferenceOptions& options,
                                    std::vector<uint32_t>& output) {
  if (absl::Status status = ValidateReferenceInputs(problem, options); !status.ok()) return status;
  if (absl::Status status = RequireDevice(); !status.ok()) return status;
  DeviceArray<int32_t> row_offsets;
  DeviceArray<uint16_t> activations;
  DeviceArray<uint8_t> codes, scales;
  DeviceArray<uint32_t> result;
  for (absl::Status status : {row_offsets.Upload(problem.row_offsets), activations.Upload(problem.activations),
                              codes.Upload(problem.packed_codes), scales.Upload(problem.scale_bytes)}) {
    if (!status.ok()) return status;
  }
  const size_t outputs = size_t(problem.rows()) * size_t(problem.n);
  if (absl::Status status = result.Allocate(outputs); !status.ok()) return status;
  const device_internal::GemmArgs args{problem.groups,
                                       problem.n,
                                       problem.k,
                                       problem.rows(),
                                       options.tactic.cta_k,
                                       options.tactic.splits,
                                       int(options.transform),
                                       int(options.model),
                                       row_offsets.get(),
                                       activations.get(),
                                       codes.get(),
                                       scales.get(),
                                       result.get()};
  if (absl::Status status = CudaStatus(device_internal::LaunchReferenceGemm(args), "kernel launch"); !status.ok())
    return status;
  if (absl::Status status = CudaStatus(cudaDeviceSynchronize(), "kernel"); !status.ok()) return status;
  output.assign(outputs, 0);
  return result.Download(output);
}

absl::Status DeviceReferenceGemm(const GroupedProblem& problem, const ReferenceOptions& options,
                                 std::vector<uint16_t>& output) {
  std::vector<uint32_t> f32;
  if (absl::Status status = DeviceReferenceGemmF32(problem, options, f32); !status.ok()) return status;
  output.resize(f32.size());
  for (size_t i = 0; i < f32.size(); ++i) output[i] = f32_to_f16_rne(bits_to_f32(f32[i]));
  return absl::OkStatus();
}

absl::Status DeviceChainSteps(StepModel model, int k, std::span<const uint32_t> c, std::span<const uint16_t> a,
                              std::span<const uint16_t> b, std::vector<uint32_t>& d) {
  if (int(model) >= kStepModelCount) return absl::InvalidArgumentError("unknown step model");
  if (k <= 0 || k % 4 != 0) return absl::InvalidArgumentError(fmt::format("k must be a positive multiple of 4, got {}", k));
  if (a.size() != c.size() * size_t(k) || b.size() != c.size() * size_t(k)) {
    return absl::InvalidArgumentError(
        fmt::format("{} chains of k {} need {} a and b values, got {} and {}", c.size(), k, c.size() * size_t(k),
                    a.size(), b.size()));
  }
  if (c.size() > size_t(1) << 30) return absl::ResourceExhaustedError("more than 2^30 step chains");
  if (absl::Status status = RequireDevice(); !status.ok()) return status;
  DeviceArray<uint32_t> device_c, device_d;
  DeviceArray<uint16_t> device_a, device_b;
  for (absl::Status status : {device_c.Upload(c), device_a.Upload(a), device_b.Upload(b), device_d.Allocate(c.size())}) {
    if (!status.ok()) return status;
  }
  if (absl::Status status = CudaStatus(device_internal::LaunchChainSteps(int(model), int(c.size()), k, device_c.get(),
                                                                         device_a.get(), device_b.get(), device_d.get()),
                                       "kernel launch");
      !status.ok())
    return status;
  if (absl::Status status = CudaStatus(cudaDeviceSynchronize(), "kernel"); !status.ok()) return status;
  d.assign(c.size(), 0);
  return device_d.Download(d);
}

}  // namespace mxdiff
