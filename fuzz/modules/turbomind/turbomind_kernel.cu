// libmxdiff_turbomind_kernel.so: LMDeploy's TurboMind SM70 MXFP4 grouped GEMM (range-widened to run
// on sm_90, README.md) behind mxdiff's kernel C ABI (fuzz/modules/mxdiff_kernel_abi.h).
//
// Everything arithmetic is TurboMind's: the weights are packed by its converters for sm 70 (the
// layout its SM70 kernels read), the scales prepared by AdjustUe8m0ScaleForHalf, the experts
// linked as StridedPtr tables the way LMDeploy's MoE weights are, and the product runs through
// Gemm::Run (blocked by the row offsets, Epilogue::kNone, fp16 out), as LMDeploy's W2 call does.
// Our part is choosing the kernel (any feasible MXF4 one, as a function of the request) and
// launching it with the requested split count, which TurboMind clamps as it does for LMDeploy:
// one Gemm object per (kernel, splits), each given a one-record dispatch cache per shape, so
// Gemm::Run's exact cache hit launches that plan and never the heuristic. The module reports the
// plan that ran (kernel C ABI version 2): fuzz_gemm holds the output to it.
//
// TurboMind aborts the process on a failed check (TM_LOG_FATAL, TM_CHECK, TM_CUDA_CHECK), so
// every request is validated before the first TurboMind call that could reach one.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "src/turbomind/kernels/gemm/cast.h"
#include "src/turbomind/kernels/gemm/context.h"
#include "src/turbomind/kernels/gemm/convert.h"
#include "src/turbomind/kernels/gemm/desc.h"
#include "src/turbomind/kernels/gemm/gemm.h"
#include "src/turbomind/kernels/gemm/kernel.h"
#include "src/turbomind/kernels/gemm/registry.h"
#include "src/turbomind/kernels/gemm/types.h"

#define MXDIFF_TM_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

namespace gemm = turbomind::gemm;

// Which build this is: the folded one's kernel unit includes transform.h with folded.patch (CMakeLists.txt).
#ifdef MXDIFF_TURBOMIND_FOLDED
constexpr int kServedTransform = 1;
constexpr const char* kModuleName = "turbomind-folded";
#else
constexpr int kServedTransform = 0;
constexpr const char* kModuleName = "turbomind-sm70-mxf4";
#endif
constexpr int kScaleBlock = 32;          // MXFP4: one UE8M0 scale per 32 k
constexpr int kConverterSm = 70;         // the SM70 layout, whatever the device (README.md)
constexpr int kSwizzle = 0;              // the tuner's first swizzle (TuningParams), the heuristic's
constexpr size_t kLmdeployPartials = gemm::Gemm::kPartialsSize;
constexpr size_t kDefaultPartialsCap = size_t(1) << 30;

// The layout of TurboMind's dispatch-cache file ("TMGEMM2", version 4: dispatch_cache.cu), the
// one way to hand Gemm::Run a plan. Import checks magic, version and record size, and keeps a
// record only when its KernelDesc equals a registered kernel's, so a changed layout upstream is
// a refused import (FAILED), never a silently different plan.
struct DispatchCacheHeader {
  char magic[8];
  uint32_t version;
  uint32_t record_size;
  uint64_t record_count;
};
struct DispatchCacheRecord {
  gemm::GemmDesc gemm;
  gemm::KernelDesc kernel;
  int swizzle;
  int splits;
};
constexpr char kDispatchCacheMagic[8] = {'T', 'M', 'G', 'E', 'M', 'M', '2', '\0'};
constexpr uint32_t kDispatchCacheVersion = 4;

struct Outcome {
  int code = MXDIFF_KERNEL_OK;
  std::string message;
};
Outcome Unsupported(std::string text) { return {MXDIFF_KERNEL_UNSUPPORTED, std::move(text)}; }
Outcome Failed(std::string text) { return {MXDIFF_KERNEL_FAILED, std::move(text)}; }

// MXDIFF_TURBOMIND_LOG=FILE: one line per call, appended (each worker of a campaign appends to the
// same file), so a campaign can say which kernels ran and why cases were declined.
void AppendToCallLog(const std::string& line) {
  const char* path = std::getenv("MXDIFF_TURBOMIND_LOG");
  if (path == nullptr || *path == '\0') return;
  if (FILE* log = std::fopen(path, "a")) {
    std::fprintf(log, "%s\n", line.c_str());
    std::fclose(log);
  }
}

std::string CudaText(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + " (" + cudaGetErrorString(error) + ")";
}

// TurboMind's Import/Export print a per-kernel summary on std::cout, and its import errors on
// std::cerr; fuzz_gemm's output is its own, so both are captured while TurboMind talks.
class CapturedStreams {
 public:
  CapturedStreams() : out_(std::cout.rdbuf(captured_.rdbuf())), err_(std::cerr.rdbuf(captured_.rdbuf())) {}
  ~CapturedStreams() {
    std::cout.rdbuf(out_);
    std::cerr.rdbuf(err_);
  }
  std::string text() const { return captured_.str(); }

 private:
  std::ostringstream captured_;
  std::streambuf* out_;
  std::streambuf* err_;
};

template <class T>
struct DeviceBuffer {
  T* data = nullptr;
  size_t count = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (data != nullptr) cudaFree(data);
  }
  cudaError_t Allocate(size_t n) {
    if (data != nullptr) cudaFree(data);
    data = nullptr;
    count = n;
    return cudaMalloc(reinterpret_cast<void**>(&data), std::max<size_t>(n, 1) * sizeof(T));
  }
};

// The MXF4 kernels TurboMind registered for this device: HMMA 884, e2m1 weights, not the
// transposed twins the registry adds for each.
bool IsMxf4Kernel(const gemm::Kernel& kernel) {
  const auto& desc = kernel.desc();
  return !desc.transpose && desc.type_b == turbomind::kFloat4_e2m1 && desc.op_class == gemm::OpClass::kMMA_h884;
}

std::string PlanText(const gemm::Kernel& kernel) {
  const auto& desc = kernel.desc();
  return kernel.name() + " cta=" + std::to_string(desc.cta_tile.x) + "x" + std::to_string(desc.cta_tile.y) + "x" +
         std::to_string(desc.cta_tile.z) + " chunk=" + std::to_string(kernel.chunk_size_k());
}

// The kernel's label in the plan it reports (mxdiff_plan::kernel, at most 63 characters):
// TurboMind's own name is longer, and the MXF4 family's kernels differ in their CTA tile, warp
// tile and stages, which the label names.
std::string KernelLabel(const gemm::Kernel& kernel) {
  const auto& desc = kernel.desc();
  return "sm70_mxf4_" + std::to_string(desc.cta_tile.x) + "x" + std::to_string(desc.cta_tile.y) + "x" +
         std::to_string(desc.cta_tile.z) + "_w" + std::to_string(desc.mma_tile.x) + "x" +
         std::to_string(desc.mma_tile.y) + "x" + std::to_string(desc.mma_tile.z) + "_s" + std::to_string(desc.stages);
}

// The plan a kernel ran with `splits` splits: its chunk as cta_k (docs/numerics.md's partition is
// lcm(32, cta_k)-chunks, and TurboMind's chunk is lcm(group 32, CTA_K): the same partition).
mxdiff_plan RanPlan(const gemm::Kernel& kernel, int splits) {
  mxdiff_plan plan{};
  plan.cta_k = kernel.chunk_size_k();
  plan.splits = splits;
  const std::string label = KernelLabel(kernel);
  std::memcpy(plan.kernel, label.data(), std::min(label.size(), sizeof(plan.kernel) - 1));
  return plan;
}

class TurboMindRunner {
 public:
  // Never destroyed: at exit the CUDA runtime may already be unloaded, and a process that ends
  // needs no cudaFree.
  static TurboMindRunner& Instance() {
    static TurboMindRunner* runner = new TurboMindRunner;
    return *runner;
  }

  // A device or start-up failure, reported by every call (FAILED: the module could not test).
  const std::string& start_error() const { return start_error_; }
  const std::vector<gemm::Kernel*>& kernels() const { return mxf4_kernels_; }

  Outcome Run(const mxdiff_problem& p, uint16_t* output) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!start_error_.empty()) return Failed(start_error_);
    if (Outcome checked = CheckRequest(p); checked.code != MXDIFF_KERNEL_OK) return checked;
    const int rows = p.row_offsets[p.groups];
    if (rows == 0) return {};  // nothing to compute; TurboMind is never called with no tokens
    if (output == nullptr) return Failed("turbomind/descriptor: null output for " + std::to_string(rows) + " rows");

    if (Outcome uploaded = Upload(p, rows, output); uploaded.code != MXDIFF_KERNEL_OK) return uploaded;
    gemm::MatrixLayout b_desc{}, v_desc{};
    if (Outcome packed = PackWeights(p, b_desc, v_desc); packed.code != MXDIFF_KERNEL_OK) return packed;

    gemm::Operation operation{};
    operation.dispatch = gemm::DispatchPolicy::kDefault;
    operation.epilogue = gemm::Epilogue::kNone;
    operation.quant_a = {gemm::QuantType::kNone, 0};
    operation.quant_b = {gemm::QuantType::kK, kScaleBlock};
    operation.batch_dim = 0;
    gemm::MatrixLayout a_desc{turbomind::kHalf, gemm::kRowMajor, rows, p.k, p.k};
    a_desc.num = p.groups;
    a_desc.offsets = offsets_.data;
    gemm::MatrixLayout d_desc{turbomind::kHalf, gemm::kRowMajor, rows, p.n, p.n};
    d_desc.num = p.groups;
    d_desc.offsets = offsets_.data;
    const gemm::MatrixLayout u_desc{};

    // Run would TM_LOG_FATAL on descriptors it cannot key, and a pinned plan skips the
    // feasibility test its heuristic makes: both are asked here first.
    gemm::Context context{props_};
    if (!context.Init(operation, a_desc, u_desc, b_desc, v_desc, d_desc, d_desc)) {
      return Failed("turbomind/context: Context::Init rejected the descriptors");
    }
    gemm::Kernel* kernel = nullptr;
    if (Outcome chosen = ChooseKernel(p, rows, context.desc(), kernel); chosen.code != MXDIFF_KERNEL_OK) return chosen;
    int splits = 0;
    if (Outcome planned = PlanSplits(p, rows, *kernel, splits); planned.code != MXDIFF_KERNEL_OK) return planned;
    gemm::Gemm* pinned = nullptr;
    if (Outcome pin = Pin(*kernel, splits, context.desc(), pinned); pin.code != MXDIFF_KERNEL_OK) return pin;

    // B and V have ld 0 (LinkLinearExperts' mark of an expert table): their data pointers are the
    // StridedPtr tables, which the kernel reads per group (matrix_ptr.h, resolve), not the packed
    // tensors themselves (read as a table, their bytes become wild addresses).
    const int status = pinned->Run(operation, 1.f, activations_.data, a_desc, nullptr, u_desc, code_table_.get(),
                                   b_desc, scale_table_.get(), v_desc, 0.f, output_.data, d_desc, output_.data, d_desc,
                                   nullptr, gemm::MatrixLayout{}, workspace_, stream_);
    if (status != 0) return Failed("turbomind/run: Gemm::Run returned " + std::to_string(status));
    if (cudaError_t error = cudaGetLastError(); error != cudaSuccess) {
      return Failed("cuda/launch: " + PlanText(*kernel) + ": " + CudaText(error));
    }
    if (cudaError_t error = cudaStreamSynchronize(stream_); error != cudaSuccess) {
      return Failed("cuda/run: " + PlanText(*kernel) + ": " + CudaText(error));
    }
    if (cudaError_t error = cudaMemcpy(output, output_.data, size_t(rows) * p.n * sizeof(uint16_t),
                                       cudaMemcpyDeviceToHost);
        error != cudaSuccess) {
      return Failed("cuda/copy: " + CudaText(error));
    }
    LogCall(p, rows, *kernel, splits);
    if (p.ran_plan != nullptr) *p.ran_plan = RanPlan(*kernel, splits);
    return {};
  }

 private:
  TurboMindRunner() {
    // The logger is created on first use, per thread: without these its worker thread would
    // install its own handlers for SIGSEGV, SIGABRT, SIGFPE, SIGILL and SIGBUS over fuzz_gemm's.
    setenv("TM_LOG_ASYNC", "0", 1);
    setenv("TM_LOG_SIGNALS", "0", 1);
    int device = -1;
    if (cudaError_t error = cudaGetDevice(&device); error != cudaSuccess) {
      start_error_ = "turbomind/no-device: " + CudaText(error);
      return;
    }
    if (cudaError_t error = cudaGetDeviceProperties(&props_, device); error != cudaSuccess) {
      start_error_ = "turbomind/no-device: " + CudaText(error);
      return;
    }
    if (props_.major != 9) {
      start_error_ = "turbomind/device: this module is built for sm_90, the device is sm_" +
                     std::to_string(props_.major * 10 + props_.minor);
      return;
    }
    if (cudaError_t error = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); error != cudaSuccess) {
      start_error_ = "turbomind/start: " + CudaText(error);
      return;
    }
    registry_ = std::make_unique<gemm::Registry>(std::make_shared<cudaDeviceProp>(props_));
    for (gemm::Kernel* kernel : registry_->kernels()) {
      if (IsMxf4Kernel(*kernel)) mxf4_kernels_.push_back(kernel);
    }
    if (mxf4_kernels_.empty()) {
      start_error_ = "turbomind/registry: no MXF4 SM70 kernel registered for sm_" +
                     std::to_string(props_.major * 10 + props_.minor) + " (is the range widening applied?)";
      return;
    }
    if (const char* cap = std::getenv("MXDIFF_TURBOMIND_PARTIALS_MB")) partials_cap_ = size_t(std::atoll(cap)) << 20;
    partials_cap_ = std::max(partials_cap_, kLmdeployPartials);
    // LMDeploy's workspace (LlamaLinear): the barriers zeroed once, the last split of a tile
    // resets its lock, so they stay zero between launches.
    if (Outcome grown = SetPartials(kLmdeployPartials); grown.code != MXDIFF_KERNEL_OK) {
      start_error_ = grown.message;
      return;
    }
    if (cudaError_t error = barriers_.Allocate(gemm::Gemm::kBarriersSize); error != cudaSuccess ||
        (error = cudaMemset(barriers_.data, 0, barriers_.count)) != cudaSuccess) {
      start_error_ = "turbomind/start: workspace: " + CudaText(error);
      return;
    }
    workspace_.barriers = barriers_.data;
    workspace_.barriers_size = barriers_.count;
  }

  Outcome SetPartials(size_t bytes) {
    if (cudaError_t error = partials_.Allocate(bytes); error != cudaSuccess) {
      workspace_.partials = nullptr;
      workspace_.partials_size = 0;
      return Failed("cuda/alloc: " + std::to_string(bytes >> 20) + " MiB of split-K partials: " + CudaText(error));
    }
    workspace_.partials = partials_.data;
    workspace_.partials_size = bytes;
    return {};
  }

  static Outcome CheckRequest(const mxdiff_problem& p) {
    if (p.groups <= 0 || p.n <= 0 || p.k <= 0 || p.row_offsets == nullptr) {
      return Failed("turbomind/descriptor: bad problem descriptor");
    }
    if (p.row_offsets[0] != 0) return Failed("turbomind/descriptor: row_offsets[0] is not 0");
    for (int g = 0; g < p.groups; ++g) {
      if (p.row_offsets[g + 1] < p.row_offsets[g]) return Failed("turbomind/descriptor: row_offsets descend");
    }
    // Each build runs one transform, the one its transform.h computes: the folded build (folded.patch,
    // MXDIFF_TURBOMIND_FOLDED) computes it on any scale byte exactly as docs/numerics.md specifies it;
    // a layer with a byte the fold cannot take exactly falls back to the ordinary transform in the
    // caller (DecideRoute), which is the ordinary module's.
    if (p.transform != kServedTransform) {
      return Unsupported("transform " + std::to_string(p.transform) + ": this module (" + kModuleName +
                         ") runs TurboMind's " + (kServedTransform == 1 ? "folded" : "ordinary") +
                         " dequantization only (transform " + std::to_string(kServedTransform) + "); the " +
                         (kServedTransform == 1 ? "ordinary one is libmxdiff_turbomind_kernel.so"
                                                : "folded one is libmxdiff_turbomind_folded_kernel.so"));
    }
    if (p.step_model != 1 && p.step_model != 2) {
      return Unsupported("step model " + std::to_string(p.step_model) +
                         ": TurboMind's HMMA 884 kernels run emulated on sm_90 (sm90-emulated, "
                         "sm90-emulated-ftz)");
    }
    if (p.k % kScaleBlock != 0) return Unsupported("k " + std::to_string(p.k) + " is not a multiple of 32");
    if (p.n % 32 != 0) {
      return Unsupported("n " + std::to_string(p.n) +
                         " is not a multiple of 32: TurboMind's HMMA 884 weight packing works on 32-column "
                         "slices and its output stores are 4-wide");
    }
    if (p.cta_k <= 0 || p.splits <= 0) {
      return Unsupported("cta_k " + std::to_string(p.cta_k) + " / splits " + std::to_string(p.splits));
    }
    if (int64_t(p.row_offsets[p.groups]) * std::max(p.n, p.k) > INT32_MAX) {
      return Unsupported("rows x max(n, k) exceeds TurboMind's 32-bit leading dimensions");
    }
    return {};
  }

  // Any MXF4 kernel TurboMind finds feasible for the problem (K % CTA_K among its tests) may run:
  // the module reports the plan it ran (ABI version 2) and is judged by it, so every kernel is
  // reachable whatever the request's cta_k. The choice is a function of the request (repro replays
  // it) that varies with every field of the plan and shape, so a campaign reaches each kernel;
  // MXDIFF_TURBOMIND_CTA_M=M keeps only CTA_M = M.
  Outcome ChooseKernel(const mxdiff_problem& p, int rows, const gemm::GemmDesc& desc, gemm::Kernel*& chosen) const {
    const char* only_cta_m = std::getenv("MXDIFF_TURBOMIND_CTA_M");
    std::vector<gemm::Kernel*> candidates;
    std::string rejected;
    for (gemm::Kernel* kernel : mxf4_kernels_) {
      if (only_cta_m != nullptr && kernel->desc().cta_tile.x != std::atoi(only_cta_m)) continue;
      if (!kernel->is_feasible(desc)) {
        rejected += " " + KernelLabel(*kernel);
        continue;
      }
      candidates.push_back(kernel);
    }
    if (candidates.empty()) {
      return Unsupported("no TurboMind MXF4 kernel is feasible for " + gemm::to_string(desc) +
                         (rejected.empty() ? "" : "; infeasible:" + rejected) +
                         (only_cta_m ? std::string("; MXDIFF_TURBOMIND_CTA_M=") + only_cta_m : ""));
    }
    const uint64_t mix = uint64_t(rows) * 0x9E3779B97F4A7C15ull ^ uint64_t(p.groups) * 0xC2B2AE3D27D4EB4Full ^
                         uint64_t(p.n) * 31 ^ uint64_t(p.k) * 131 ^ uint64_t(p.splits) * 8191 ^
                         uint64_t(p.cta_k) * 0x165667B19E3779F9ull;
    chosen = candidates[(mix ^ (mix >> 29)) % candidates.size()];
    return {};
  }

  // TurboMind clamps the split count silently: to cdiv(k, chunk) when the workspace holds one
  // partial tile per output tile, else to 1 (KernelImpl::GetMaxSplits, called here so the rule is
  // theirs), and Launch runs min(requested, that). The module lets it clamp and reports what ran.
  // The partials grow past LMDeploy's 32 MiB (up to MXDIFF_TURBOMIND_PARTIALS_MB, default 1 GiB)
  // where that lets the requested split count run: the size changes only whether the clamp to 1
  // happens, so more split counts are reachable.
  Outcome PlanSplits(const mxdiff_problem& p, int rows, const gemm::Kernel& kernel, int& splits) {
    const int4 shape{rows, p.n, p.k, std::max(1, p.groups)};
    auto turbomind_splits = [&](size_t partials) {
      return std::min(p.splits, kernel.GetMaxSplits(shape, kSwizzle, workspace_.barriers_size, partials));
    };
    if (p.splits > 1 && turbomind_splits(workspace_.partials_size) == 1) {
      size_t partials = workspace_.partials_size;
      while (partials < partials_cap_ && turbomind_splits(partials) == 1) {
        partials = std::min(partials * 2, partials_cap_);
      }
      if (turbomind_splits(partials) > 1 && partials != workspace_.partials_size) {
        if (Outcome grown = SetPartials(partials); grown.code != MXDIFF_KERNEL_OK) return grown;
      }
    }
    splits = turbomind_splits(workspace_.partials_size);
    if (splits < 1) {
      return Failed("turbomind/splits: GetMaxSplits gave " + std::to_string(splits) + " for " + PlanText(kernel));
    }
    return {};
  }

  // The output starts as the caller's (poisoned) buffer, so an element the kernel does not write
  // comes back poisoned, never as a previous call's value.
  Outcome Upload(const mxdiff_problem& p, int rows, const uint16_t* output) {
    const size_t groups = size_t(p.groups), n = size_t(p.n), k = size_t(p.k);
    struct Copy {
      void* device;
      const void* host;
      size_t bytes;
    };
    cudaError_t error = cudaSuccess;
    auto ensure = [&](auto& buffer, size_t count) {
      if (error == cudaSuccess && buffer.count < count) error = buffer.Allocate(count);
    };
    ensure(offsets_, groups + 1);
    ensure(activations_, size_t(rows) * k);
    ensure(raw_codes_, groups * n * k / 2);
    ensure(output_, size_t(rows) * n);
    if (error != cudaSuccess) return Failed("cuda/alloc: " + CudaText(error));
    const Copy copies[] = {{offsets_.data, p.row_offsets, (groups + 1) * sizeof(int)},
                           {activations_.data, p.activations, size_t(rows) * k * sizeof(uint16_t)},
                           {raw_codes_.data, p.packed_codes, groups * n * k / 2},
                           {output_.data, output, size_t(rows) * n * sizeof(uint16_t)}};
    // On stream_ itself: it is a non-blocking stream, and a plain cudaMemcpy from pageable memory
    // may return before its DMA lands, so the kernels on stream_ could read stale offsets or data.
    for (const Copy& copy : copies) {
      if ((error = cudaMemcpyAsync(copy.device, copy.host, copy.bytes, cudaMemcpyHostToDevice, stream_)) !=
          cudaSuccess) {
        return Failed("cuda/copy: " + CudaText(error));
      }
    }
    return {};
  }

  // LinearWeight::prepare for one expert at a time, then LinkLinearExperts: TurboMind's own
  // functions, the sm 70 converters. mxdiff's codes [n][k/2] (low nibble = even k) are what
  // extend_to_u16 turns into LMDeploy's transposed u16 [n][k]; the scales [n][k/32] are
  // transposed here to LMDeploy's [k/32][n] (the V converter's source order is fixed).
  Outcome PackWeights(const mxdiff_problem& p, gemm::MatrixLayout& b_desc, gemm::MatrixLayout& v_desc) {
    const int groups = p.groups, n = p.n, k = p.k;
    const size_t code_bytes = size_t(n) * k / 2, scale_bytes = size_t(n) * k / kScaleBlock;
    // Each expert's packed tensors start 256-byte aligned, like separate allocations.
    const size_t code_stride = (code_bytes + 255) / 256 * 256, scale_stride = (scale_bytes + 255) / 256 * 256;
    auto [convert_w, convert_s] = gemm::GetConverters(turbomind::kHalf, turbomind::kFloat4_e2m1, turbomind::kHalf,
                                                      /*grouped=*/true, kConverterSm);
    if (convert_w == nullptr || convert_s == nullptr) {
      return Failed("turbomind/pack: GetConverters(half, e2m1, half, grouped, sm 70) returned no converter");
    }
    // The layouts below are LinearWeight::prepare's for a B-operand weight converter of order
    // kRowMajor (it then transposes to (n, k), which mxdiff's codes already are) and a V-operand
    // scale converter of order kColMajor; another answer is another layout, not ours to guess.
    if (convert_w->order != gemm::kRowMajor || gemm::get_operand_tag(convert_w->pack) != gemm::OPERAND_B ||
        convert_s->order != gemm::kColMajor || gemm::get_operand_tag(convert_s->pack) != gemm::OPERAND_V) {
      return Failed("turbomind/pack: the sm 70 e2m1 converters are not (B, row-major) and (V, column-major)");
    }
    cudaError_t error = cudaSuccess;
    if (codes_.count < groups * code_stride) error = codes_.Allocate(groups * code_stride);
    if (error == cudaSuccess && scales_.count < groups * scale_stride) error = scales_.Allocate(groups * scale_stride);
    if (error == cudaSuccess && wide_.count < size_t(n) * k) error = wide_.Allocate(size_t(n) * k);
    if (error == cudaSuccess && scale_rows_.count < groups * scale_bytes) error = scale_rows_.Allocate(groups * scale_bytes);
    if (error != cudaSuccess) return Failed("cuda/alloc: " + CudaText(error));

    const int k_blocks = k / kScaleBlock;
    std::vector<uint8_t> transposed(size_t(groups) * scale_bytes);
    for (int g = 0; g < groups; ++g) {
      const uint8_t* from = p.scale_bytes + size_t(g) * scale_bytes;
      uint8_t* to = transposed.data() + size_t(g) * scale_bytes;
      for (int row = 0; row < n; ++row) {
        for (int block = 0; block < k_blocks; ++block) to[size_t(block) * n + row] = from[size_t(row) * k_blocks + block];
      }
    }
    // On stream_, before AdjustUe8m0ScaleForHalf reads it there (see Upload); `transposed` outlives
    // the copy: the stream is synchronized below before it goes out of scope.
    if ((error = cudaMemcpyAsync(scale_rows_.data, transposed.data(), transposed.size(), cudaMemcpyHostToDevice,
                                 stream_)) != cudaSuccess) {
      return Failed("cuda/copy: " + CudaText(error));
    }
    std::vector<std::pair<void*, int>> code_table, scale_table;
    gemm::MatrixLayout k_desc{}, q_desc{};
    for (int g = 0; g < groups; ++g) {
      uint8_t* codes = codes_.data + g * code_stride;
      uint8_t* scales = scales_.data + g * scale_stride;
      turbomind::extend_to_u16(wide_.data, reinterpret_cast<const turbomind::uint4_t*>(raw_codes_.data + g * code_bytes),
                               size_t(n) * k, stream_);
      // w_desc: (n, k) row-major as the B operand, i.e. (k, n) column-major.
      gemm::MatrixLayout w_desc{turbomind::kHalf, gemm::kColMajor, k, n, k};
      gemm::MatrixLayout packed = w_desc;
      packed.type = turbomind::data_type_v<turbomind::uint4_t>;
      packed.pack = convert_w->pack;
      cudaMemsetAsync(codes, 0, code_bytes, stream_);
      if (int status = convert_w->Convert(wide_.data, w_desc, codes, packed, stream_); status != 0) {
        return Failed("turbomind/pack: weight Convert returned " + std::to_string(status));
      }
      packed.type = turbomind::kFloat4_e2m1;
      k_desc = packed;

      uint8_t* scale_rows = scale_rows_.data + size_t(g) * scale_bytes;
      turbomind::AdjustUe8m0ScaleForHalf(scale_rows, int(scale_bytes), stream_);
      // s_desc: (n, k/32) column-major with ld n, i.e. (k/32, n) row-major.
      gemm::MatrixLayout s_desc{turbomind::kUint8, gemm::kRowMajor, k_blocks, n, n};
      gemm::MatrixLayout packed_scales = s_desc;
      packed_scales.pack = convert_s->pack;
      if (int status = convert_s->Convert(scale_rows, s_desc, scales, packed_scales, stream_); status != 0) {
        return Failed("turbomind/pack: scale Convert returned " + std::to_string(status));
      }
      q_desc = packed_scales;
      code_table.emplace_back(codes, k_desc.ld);
      scale_table.emplace_back(scales, q_desc.ld);
    }
    // LinkLinearExperts: one StridedPtr per expert, ld 0 marking the table.
    code_table_.reset(gemm::MakeStridedPtrs(code_table, stream_));
    scale_table_.reset(gemm::MakeStridedPtrs(scale_table, stream_));
    if ((error = cudaStreamSynchronize(stream_)) != cudaSuccess) return Failed("cuda/pack: " + CudaText(error));
    k_desc.num = q_desc.num = groups;
    k_desc.ld = q_desc.ld = 0;
    k_desc.offsets = q_desc.offsets = nullptr;
    b_desc = k_desc;
    v_desc = q_desc;
    return {};
  }

  // One Gemm per (kernel, splits), so its cache can hold that plan for every shape; a shape is
  // imported once (the first record of a key wins in TurboMind's cache).
  Outcome Pin(const gemm::Kernel& kernel, int splits, const gemm::GemmDesc& desc, gemm::Gemm*& pinned) {
    Pinned& entry = pins_[{&kernel, splits}];
    if (!entry.gemm) {
      CapturedStreams quiet;
      entry.gemm = std::make_unique<gemm::Gemm>();
    }
    const std::string key(reinterpret_cast<const char*>(&desc), sizeof(desc));
    if (entry.imported.count(key) == 0) {
      DispatchCacheHeader header{};
      std::memcpy(header.magic, kDispatchCacheMagic, sizeof(header.magic));
      header.version = kDispatchCacheVersion;
      header.record_size = sizeof(DispatchCacheRecord);
      header.record_count = 1;
      DispatchCacheRecord record{};
      record.gemm = desc;
      record.kernel = kernel.desc();
      record.swizzle = kSwizzle;
      record.splits = splits;
      std::stringstream file(std::ios::in | std::ios::out | std::ios::binary);
      file.write(reinterpret_cast<const char*>(&header), sizeof(header));
      file.write(reinterpret_cast<const char*>(&record), sizeof(record));
      int imported = 0;
      std::string said;
      {
        CapturedStreams quiet;
        imported = entry.gemm->Import(file);
        said = quiet.text();
      }
      if (imported != 1) {
        std::replace(said.begin(), said.end(), '\n', ' ');
        return Failed("turbomind/import: the dispatch cache took " + std::to_string(imported) + " of 1 records for " +
                      PlanText(kernel) + "; TurboMind said: " + said.substr(0, 400));
      }
      entry.imported.insert(key);
    }
    pinned = entry.gemm.get();
    return {};
  }

  void LogCall(const mxdiff_problem& p, int rows, const gemm::Kernel& kernel, int splits) const {
    char line[256];
    std::snprintf(line, sizeof line,
                  "kernel=%s cta=%dx%dx%d chunk=%d cta_k=%d splits=%d effective_splits=%d groups=%d rows=%d n=%d k=%d",
                  kernel.name().c_str(), kernel.desc().cta_tile.x, kernel.desc().cta_tile.y, kernel.desc().cta_tile.z,
                  kernel.chunk_size_k(), p.cta_k, p.splits, splits, p.groups, rows, p.n, p.k);
    AppendToCallLog(line);
  }

  struct Pinned {
    std::unique_ptr<gemm::Gemm> gemm;
    std::set<std::string> imported;
  };
  struct CudaFree {
    void operator()(void* pointer) const {
      if (pointer != nullptr) cudaFree(pointer);
    }
  };

  std::mutex mutex_;
  std::string start_error_;
  cudaDeviceProp props_{};
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<gemm::Registry> registry_;
  std::vector<gemm::Kernel*> mxf4_kernels_;
  std::map<std::pair<const gemm::Kernel*, int>, Pinned> pins_;
  size_t partials_cap_ = kDefaultPartialsCap;
  gemm::Workspace workspace_{};
  DeviceBuffer<uint8_t> barriers_, partials_;
  DeviceBuffer<int> offsets_;
  DeviceBuffer<uint16_t> activations_, output_, wide_;
  DeviceBuffer<uint8_t> raw_codes_, codes_, scales_, scale_rows_;
  std::unique_ptr<void, CudaFree> code_table_, scale_table_;
};

int Report(const Outcome& outcome, char* message, size_t message_size) {
  if (outcome.code != MXDIFF_KERNEL_OK && message_size > 0) {
    const size_t length = std::min(outcome.message.size(), message_size - 1);
    std::memcpy(message, outcome.message.data(), length);
    message[length] = '\0';
  }
  return outcome.code;
}

int RunTurboMind(const mxdiff_problem* problem, uint16_t* output, char* message, size_t message_size) {
  if (problem == nullptr) return Report(Failed("turbomind/descriptor: null problem"), message, message_size);
  try {
    Outcome outcome = TurboMindRunner::Instance().Run(*problem, output);
    if (outcome.code == MXDIFF_KERNEL_UNSUPPORTED) AppendToCallLog("declined " + outcome.message);
    return Report(outcome, message, message_size);
  } catch (const std::exception& error) {
    return Report(Failed(std::string("turbomind/exception: ") + error.what()), message, message_size);
  }
}

constexpr mxdiff_kernel kTurboMindKernel = {MXDIFF_KERNEL_ABI_VERSION, kModuleName, RunTurboMind};

}  // namespace

MXDIFF_TM_EXPORT const mxdiff_kernel* mxdiff_kernel_entry(void) { return &kTurboMindKernel; }

// The MXF4 kernels TurboMind registered on this device, one line each: "NAME CTA_M CTA_N CTA_K
// CHUNK LABEL\n" (LABEL: the kernel in the plans the module reports), written into buffer (truncated, always terminated). Returns the kernel count, or -1
// with the reason in buffer (no device, nothing registered).
MXDIFF_TM_EXPORT int mxdiff_turbomind_list_kernels(char* buffer, size_t buffer_size) {
  std::string text;
  int count = -1;
  try {
    TurboMindRunner& runner = TurboMindRunner::Instance();
    if (!runner.start_error().empty()) {
      text = runner.start_error();
    } else {
      count = 0;
      for (const gemm::Kernel* kernel : runner.kernels()) {
        const auto& desc = kernel->desc();
        text += kernel->name() + " " + std::to_string(desc.cta_tile.x) + " " + std::to_string(desc.cta_tile.y) + " " +
                std::to_string(desc.cta_tile.z) + " " + std::to_string(kernel->chunk_size_k()) + " " +
                KernelLabel(*kernel) + "\n";
        ++count;
      }
    }
  } catch (const std::exception& error) {
    text = std::string("turbomind/exception: ") + error.what();
    count = -1;
  }
  if (buffer != nullptr && buffer_size > 0) {
    const size_t length = std::min(text.size(), buffer_size - 1);
    std::memcpy(buffer, text.data(), length);
    buffer[length] = '\0';
  }
  return count;
}

// The LMDeploy commit this module was written against (the build warns on another).
MXDIFF_TM_EXPORT const char* mxdiff_turbomind_commit(void) { return MXDIFF_TURBOMIND_COMMIT; }
