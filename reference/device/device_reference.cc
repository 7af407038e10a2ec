// Host side of the device reference: validation (the CPU reference's rules), device memory,
// copies, and CUDA errors as absl::Status.
#include "reference/device/device_reference.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <string>

#include "fmt/core.h"
#include "reference/device/device_launch.h"
#include "reference/fp16.h"
#include "reference/status_macros.h"

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

// `data` (cudaMalloc'd, `capacity` bytes) made at least `bytes` long, its contents dropped where
// it grows; kept where it is long enough: a fuzzing worker calls the device reference thousands of
// times a second, and cudaMalloc/cudaFree (which waits for the device) per call cost more than
// the small cases' kernels.
template <typename T>
absl::Status GrowDeviceMemory(T*& data, size_t& capacity, size_t bytes, const char* what) {
  bytes = std::max<size_t>(bytes, 1);
  if (data != nullptr && bytes <= capacity) return absl::OkStatus();
  cudaFree(data);
  data = nullptr;
  capacity = 0;
  void* fresh = nullptr;
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&fresh, bytes), what));
  data = static_cast<T*>(fresh);
  capacity = bytes;
  return absl::OkStatus();
}

// Device memory for values of T, kept and grown as needed (GrowDeviceMemory).
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }

  absl::Status Allocate(size_t count) { return GrowDeviceMemory(data_, capacity_, count * sizeof(T), "cudaMalloc"); }
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
  size_t capacity_ = 0;
};

// One calling thread's device memory, reused from call to call.
struct Workspace {
  DeviceArray<int32_t> row_offsets;
  DeviceArray<uint16_t> activations;
  DeviceArray<uint32_t> result;
  DeviceArray<uint8_t> codes, scales;
};

Workspace& ThreadWorkspace() {
  static thread_local Workspace workspace;
  return workspace;
}

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

namespace {

// The launch on codes and scales already on the device (`problem` validated by the caller).
absl::Status GemmF32WithDeviceWeights(const GroupedProblem& problem, const uint8_t* device_codes,
                                      const uint8_t* device_scales, const ReferenceOptions& options,
                                      std::vector<uint32_t>& output) {
  Workspace& workspace = ThreadWorkspace();
  DeviceArray<int32_t>& row_offsets = workspace.row_offsets;
  DeviceArray<uint16_t>& activations = workspace.activations;
  DeviceArray<uint32_t>& result = workspace.result;
  for (absl::Status status : {row_offsets.Upload(problem.row_offsets), activations.Upload(problem.activations)}) {
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
                                       device_codes,
                                       device_scales,
                                       result.get()};
  if (absl::Status status = CudaStatus(device_internal::LaunchReferenceGemm(args), "kernel launch"); !status.ok())
    return status;
  if (absl::Status status = CudaStatus(cudaDeviceSynchronize(), "kernel"); !status.ok()) return status;
  output.assign(outputs, 0);
  return result.Download(output);
}

void ToF16(const std::vector<uint32_t>& f32, std::vector<uint16_t>& output) {
  output.resize(f32.size());
  for (size_t i = 0; i < f32.size(); ++i) output[i] = f32_to_f16_rne(bits_to_f32(f32[i]));
}

}  // namespace

absl::Status DeviceReferenceGemmF32(const GroupedProblem& problem, const ReferenceOptions& options,
                                    std::vector<uint32_t>& output) {
  if (absl::Status status = ValidateReferenceInputs(problem, options); !status.ok()) return status;
  if (absl::Status status = RequireDevice(); !status.ok()) return status;
  DeviceArray<uint8_t>& codes = ThreadWorkspace().codes;
  DeviceArray<uint8_t>& scales = ThreadWorkspace().scales;
  for (absl::Status status : {codes.Upload(problem.packed_codes), scales.Upload(problem.scale_bytes)}) {
    if (!status.ok()) return status;
  }
  return GemmF32WithDeviceWeights(problem, codes.get(), scales.get(), options, output);
}

DeviceWeights::~DeviceWeights() {
  cudaFree(codes_);
  cudaFree(scales_);
  cudaFree(chunk_refused_);
}

absl::Status DeviceWeights::Reserve(size_t code_bytes, size_t scale_bytes) {
  if (absl::Status status = RequireDevice(); !status.ok()) return status;
  code_bytes_ = scale_bytes_ = 0;
  MXDIFF_RETURN_IF_ERROR(GrowDeviceMemory(codes_, code_capacity_, code_bytes, "cudaMalloc (codes)"));
  MXDIFF_RETURN_IF_ERROR(GrowDeviceMemory(scales_, scale_capacity_, scale_bytes, "cudaMalloc (scales)"));
  code_bytes_ = code_bytes;
  scale_bytes_ = scale_bytes;
  return absl::OkStatus();
}

absl::StatusOr<LayerAdmission> DeviceWeights::AdmitScales(size_t max_reported) {
  if (absl::Status status = RequireDevice(); !status.ok()) return status;
  const size_t chunks = (scale_bytes_ + device_internal::kAdmissionChunk - 1) / device_internal::kAdmissionChunk;
  MXDIFF_RETURN_IF_ERROR(
      GrowDeviceMemory(chunk_refused_, chunk_capacity_, chunks * sizeof(uint32_t), "cudaMalloc (admission)"));
  const std::array<bool, 256>& admitted = FoldAdmittedBytes();
  device_internal::RefusedBytes refused;
  for (int raw = 0; raw < 256; ++raw) refused.bits[raw / 64] |= uint64_t(!admitted[raw]) << (raw % 64);
  MXDIFF_RETURN_IF_ERROR(
      CudaStatus(device_internal::LaunchCountRefused(scales_, scale_bytes_, refused, chunk_refused_), "admission"));
  std::vector<uint32_t> chunk_refused(chunks);
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMemcpy(chunk_refused.data(), chunk_refused_, chunks * sizeof(uint32_t),
                                               cudaMemcpyDeviceToHost),
                                    "admission counts"));
  LayerAdmission verdict;
  for (uint32_t count : chunk_refused) verdict.refused_count += count;
  verdict.admitted = verdict.refused_count == 0;
  std::vector<uint8_t> chunk_bytes;
  for (size_t chunk = 0; chunk < chunks && verdict.refused.size() < max_reported; ++chunk) {
    if (chunk_refused[chunk] == 0) continue;
    const size_t begin = chunk * device_internal::kAdmissionChunk;
    chunk_bytes.resize(std::min(device_internal::kAdmissionChunk, scale_bytes_ - begin));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpy(chunk_bytes.data(), scales_ + begin, chunk_bytes.size(), cudaMemcpyDeviceToHost), "refused bytes"));
    for (const RefusedScale& refused : AdmitLayer(chunk_bytes, max_reported - verdict.refused.size()).refused) {
      verdict.refused.push_back({begin + refused.index, refused.raw});
    }
  }
  return verdict;
}

absl::Status DeviceReferenceGemmOnDeviceWeights(const GroupedProblem& problem, const DeviceWeights& weights,
                                                const ReferenceOptions& options, std::vector<uint16_t>& output) {
  // Validated as the host problem would be: spans of the weights' sizes (never read on the host).
  GroupedProblem shaped = problem;
  shaped.packed_codes = std::span<const uint8_t>(weights.codes(), weights.code_bytes());
  shaped.scale_bytes = std::span<const uint8_t>(weights.scales(), weights.scale_bytes());
  if (absl::Status status = ValidateReferenceInputs(shaped, options); !status.ok()) return status;
  if (absl::Status status = RequireDevice(); !status.ok()) return status;
  std::vector<uint32_t> f32;
  if (absl::Status status = GemmF32WithDeviceWeights(shaped, weights.codes(), weights.scales(), options, f32);
      !status.ok())
    return status;
  ToF16(f32, output);
  return absl::OkStatus();
}

absl::Status DeviceReferenceGemm(const GroupedProblem& problem, const ReferenceOptions& options,
                                 std::vector<uint16_t>& output) {
  std::vector<uint32_t> f32;
  if (absl::Status status = DeviceReferenceGemmF32(problem, options, f32); !status.ok()) return status;
  ToF16(f32, output);
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
