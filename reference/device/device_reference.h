// The device reference: a second, deliberately simple oracle that computes on a CUDA device the
// same bits as the CPU reference (reference_gemm.h), for every step model and both transforms.
// One thread per output element runs a plain K loop in the split plan's order over the
// oracle's own host/device headers (transform.h, split_plan.h, step_model_hd.h); nothing from
// kernels/. It is checked against the CPU reference (tests/reference/device/), never the
// other way round. This header is CUDA-free; the library exists only where nvcc is found.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/admission.h"
#include "reference/problem.h"
#include "reference/reference_gemm.h"
#include "reference/step_model.h"

namespace mxdiff {

// Whether a CUDA device is there to run the device reference; `why` (optional) says why not.
bool DeviceReferenceAvailable(std::string* why = nullptr);

// What ReferenceGemmF32 / ReferenceGemm return, computed on the current device (options.path
// and options.threads do not apply). Errors: those of the CPU reference for a bad problem or
// tactic, Unavailable without a device, ResourceExhausted when device memory runs out,
// Internal for any other CUDA error.
absl::Status DeviceReferenceGemmF32(const GroupedProblem& problem, const ReferenceOptions& options,
                                    std::vector<uint32_t>& output);
absl::Status DeviceReferenceGemm(const GroupedProblem& problem, const ReferenceOptions& options,
                                 std::vector<uint16_t>& output);

// A layer's packed codes (groups x N x K/2) and scale bytes (groups x N x K/32) in device memory
// of the current device, filled there by the owner (fuzz_gemm's oracle materializes a case's
// recipes into it: fuzz/formats/tensor_recipe_device.h), so the weights never cross PCIe. Kept
// across calls and grown as needed; Reserve's errors are DeviceReferenceGemm's.
class DeviceWeights {
 public:
  DeviceWeights() = default;
  DeviceWeights(const DeviceWeights&) = delete;
  DeviceWeights& operator=(const DeviceWeights&) = delete;
  ~DeviceWeights();
  absl::Status Reserve(size_t code_bytes, size_t scale_bytes);
  uint8_t* codes() const { return codes_; }
  uint8_t* scales() const { return scales_; }
  size_t code_bytes() const { return code_bytes_; }
  size_t scale_bytes() const { return scale_bytes_; }
  // AdmitLayer's verdict on the scale bytes, counted where they are: only the chunks that hold the
  // first `max_reported` refused bytes come back to the host. Errors as Reserve's.
  absl::StatusOr<LayerAdmission> AdmitScales(size_t max_reported = 16);

 private:
  uint8_t* codes_ = nullptr;
  uint8_t* scales_ = nullptr;
  uint32_t* chunk_refused_ = nullptr;
  size_t code_bytes_ = 0, scale_bytes_ = 0, code_capacity_ = 0, scale_capacity_ = 0, chunk_capacity_ = 0;
};

// DeviceReferenceGemm with the codes and scales of `weights` (of exactly the problem's sizes;
// problem.packed_codes and problem.scale_bytes are not read): the same bits, nothing of the
// weights copied. Row offsets and activations come from the host problem.
absl::Status DeviceReferenceGemmOnDeviceWeights(const GroupedProblem& problem, const DeviceWeights& weights,
                                                const ReferenceOptions& options, std::vector<uint16_t>& output);

// Chains of steps on the device: d[r] = ChainSteps(model, c[r], a[r * k ...], b[r * k ...]) for
// every row r (k a positive multiple of 4; a and b hold c.size() * k values).
absl::Status DeviceChainSteps(StepModel model, int k, std::span<const uint32_t> c, std::span<const uint16_t> a,
                              std::span<const uint16_t> b, std::vector<uint32_t>& d);

}  // namespace mxdiff
