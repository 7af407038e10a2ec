#include "kernels/gemm_runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include "fmt/core.h"
#include "kernels/builtin_kernels.h"
#include "kernels/cuda_status.h"
#include "kernels/device_buffer.h"
#include "kernels/device_scales.h"
#include "kernels/dispatch_table.h"
#include "kernels/grouped_gemm_launch.h"
#include "kernels/launch_plan.h"
#include "kernels/tactic_cache.h"
#include "reference/status_macros.h"

namespace mxdiff {
namespace {

class DeviceLayer final : public PreparedLayer {
 public:
  DeviceLayer(int device, int groups, int n, int k, LayerAdmission admission)
      : device_(device), groups_(groups), n_(n), k_(k), admission_(std::move(admission)) {}
  int groups() const override { return groups_; }
  int n() const override { return n_; }
  int k() const override { return k_; }
  const LayerAdmission& admission() const override { return admission_; }

  int device() const { return device_; }
  DeviceBuffer codes;
  const uint8_t* borrowed_codes = nullptr;  // PrepareOnDeviceWeights: read in place, not owned
  const uint8_t* code_data() const { return borrowed_codes != nullptr ? borrowed_codes : codes.as<uint8_t>(); }
  DeviceScales prepared_scales;  // the folded ones only when admitted (PreparesTransform)

  const uint16_t* scales(Transform transform) const { return prepared_scales.scales(transform); }

 private:
  int device_;
  int groups_;
  int n_;
  int k_;
  LayerAdmission admission_;
};

constexpr int kTuneWarmups = 3;
constexpr int kTuneLaunches = 20;

class CudaGemmRunner final : public GemmRunner {
 public:
  CudaGemmRunner(int device, std::string name, int multiprocessors, KernelRegistry registry, cudaStream_t stream)
      : device_(device),
        name_(std::move(name)),
        multiprocessors_(multiprocessors),
        registry_(std::move(registry)),
        stream_(stream) {}
  ~CudaGemmRunner() override {
    cudaSetDevice(device_);
    cudaStreamDestroy(stream_);
  }

  const KernelRegistry& registry() const override { return registry_; }
  std::string DeviceName() const override { return name_; }

  absl::StatusOr<std::unique_ptr<PreparedLayer>> Prepare(int groups, int n, int k,
                                                        std::span<const uint8_t> packed_codes,
                                                        std::span<const uint8_t> scale_bytes) override {
    return PrepareFrom(groups, n, k, packed_codes.data(), packed_codes.size(), scale_bytes);
  }

  absl::StatusOr<std::unique_ptr<PreparedLayer>> PrepareOnDeviceWeights(int groups, int n, int k,
                                                                        const uint8_t* device_codes,
                                                                        const uint8_t* device_scales,
                                                                        const LayerAdmission& admission) override {
    MXDIFF_RETURN_IF_ERROR(ValidateLayerShape(groups, n, k));
    if (device_codes == nullptr || device_scales == nullptr) {
      return absl::InvalidArgumentError("no device codes or scales");
    }
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    auto layer = std::make_unique<DeviceLayer>(device_, groups, n, k, admission);
    layer->borrowed_codes = device_codes;
    const size_t scale_count = size_t(groups) * n * (k / kBlockK);
    MXDIFF_RETURN_IF_ERROR(layer->prepared_scales.Allocate(scale_count, admission));
    MXDIFF_RETURN_IF_ERROR(layer->prepared_scales.WriteFromDevice(device_scales, scale_count, admission, stream_));
    return std::unique_ptr<PreparedLayer>(std::move(layer));
  }

  absl::StatusOr<Route> Run(const PreparedLayer& layer, std::span<const int32_t> row_offsets,
                            std::span<const uint16_t> activations, std::span<uint16_t> output,
                            const RunRequest& request) override {
    absl::StatusOr<const DeviceLayer*> device_layer = Own(layer);
    if (!device_layer.ok()) return device_layer.status();
    absl::StatusOr<std::pair<Route, LaunchPlan>> routed = RouteAndPlan(**device_layer, row_offsets, request);
    if (!routed.ok()) return routed.status();
    const auto& [route, plan] = *routed;
    const size_t rows = size_t(plan.rows);
    if (activations.size() != rows * layer.k() || output.size() != rows * layer.n()) {
      return absl::InvalidArgumentError(fmt::format(
          "{} rows x K {} x N {}: activations need {} elements (got {}), output {} (got {})", rows, layer.k(),
          layer.n(), rows * layer.k(), activations.size(), rows * layer.n(), output.size()));
    }
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    MXDIFF_RETURN_IF_ERROR(staged_offsets_.Reserve(row_offsets.size_bytes(), "row offsets"));
    MXDIFF_RETURN_IF_ERROR(staged_activations_.Reserve(activations.size_bytes(), "activations"));
    MXDIFF_RETURN_IF_ERROR(staged_output_.Reserve(output.size_bytes(), "output"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(staged_offsets_.as<void>(), row_offsets.data(),
                                                      row_offsets.size_bytes(), cudaMemcpyHostToDevice, stream_),
                                      "copy row offsets"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(staged_activations_.as<void>(), activations.data(),
                                                      activations.size_bytes(), cudaMemcpyHostToDevice, stream_),
                                      "copy activations"));
    MXDIFF_RETURN_IF_ERROR(
        CudaStatus(cudaMemsetAsync(staged_output_.as<void>(), kRunnerPoisonByte, output.size_bytes(), stream_),
                   "poison output"));
    MXDIFF_RETURN_IF_ERROR(Launch(**device_layer, route, plan, row_offsets, staged_offsets_.as<int32_t>(),
                                  staged_activations_.as<uint16_t>(), staged_output_.as<uint16_t>(), stream_));
    std::vector<uint16_t> result(output.size());
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(result.data(), staged_output_.as<void>(), output.size_bytes(),
                                                      cudaMemcpyDeviceToHost, stream_),
                                      "copy output"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "kernel"));
    std::copy(result.begin(), result.end(), output.begin());
    return route;
  }

  absl::StatusOr<Route> RunOnDevice(const PreparedLayer& layer, const DeviceBatch& batch,
                                    const RunRequest& request) override {
    absl::StatusOr<const DeviceLayer*> device_layer = Own(layer);
    if (!device_layer.ok()) return device_layer.status();
    absl::StatusOr<std::pair<Route, LaunchPlan>> routed = RouteAndPlan(**device_layer, batch.row_offsets, request);
    if (!routed.ok()) return routed.status();
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    cudaStream_t stream = batch.stream != nullptr ? static_cast<cudaStream_t>(batch.stream) : stream_;
    MXDIFF_RETURN_IF_ERROR(Launch(**device_layer, routed->first, routed->second, batch.row_offsets,
                                  batch.device_row_offsets, batch.activations, batch.output, stream));
    return routed->first;
  }

  absl::StatusOr<Tactic> Tune(const PreparedLayer& layer, std::span<const int32_t> row_offsets) override {
    absl::StatusOr<const DeviceLayer*> device_layer = Own(layer);
    if (!device_layer.ok()) return device_layer.status();
    const DispatchShape shape = ShapeOf(layer.n(), layer.k(), row_offsets);
    absl::StatusOr<LaunchPlan> plan = PlanLaunch(kDefaultShapeTactic, layer.groups(), layer.n(), layer.k(),
                                                 row_offsets);
    if (!plan.ok()) return plan.status();
    const size_t rows = size_t(plan->rows);
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    MXDIFF_RETURN_IF_ERROR(staged_offsets_.Reserve(row_offsets.size_bytes(), "row offsets"));
    MXDIFF_RETURN_IF_ERROR(staged_activations_.Reserve(rows * layer.k() * 2, "activations"));
    MXDIFF_RETURN_IF_ERROR(staged_output_.Reserve(rows * layer.n() * 2, "output"));
    MXDIFF_RETURN_IF_ERROR(staged_offsets_.Upload(row_offsets, stream_, "copy row offsets"));
    // fp16 0x3C3C (1.0586) activations: finite, non-zero work for the timing.
    MXDIFF_RETURN_IF_ERROR(staged_activations_.Fill(0x3C, stream_, "fill activations"));
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&start), "cudaEventCreate"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&stop), "cudaEventCreate"));
    const DeviceBatch batch{.row_offsets = row_offsets,
                            .device_row_offsets = staged_offsets_.as<int32_t>(),
                            .activations = staged_activations_.as<uint16_t>(),
                            .output = staged_output_.as<uint16_t>(),
                            .stream = stream_};
    auto measure = [&](const Tactic& tactic) -> absl::StatusOr<double> {
      const RunRequest request{.transform = TransformRequest::kOrdinary, .tactic = tactic};
      for (int i = 0; i < kTuneWarmups; ++i) {
        if (absl::StatusOr<Route> r = RunOnDevice(layer, batch, request); !r.ok()) return r.status();
      }
      MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(start, stream_), "cudaEventRecord"));
      for (int i = 0; i < kTuneLaunches; ++i) {
        if (absl::StatusOr<Route> r = RunOnDevice(layer, batch, request); !r.ok()) return r.status();
      }
      MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(stop, stream_), "cudaEventRecord"));
      MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(stop), "kernel"));
      float milliseconds = 0;
      MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&milliseconds, start, stop), "cudaEventElapsedTime"));
      return milliseconds * 1e-3 / kTuneLaunches;
    };
    absl::StatusOr<Tactic> best = FastestTactic(CandidateTactics(registry_, shape), measure);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (best.ok()) cache_.Store(name_, shape, *best);
    return best;
  }

  Tactic DefaultTactic(int n, int k, std::span<const int32_t> row_offsets) const override {
    const DispatchShape shape = ShapeOf(n, k, row_offsets);
    if (std::optional<Tactic> cached = cache_.Find(name_, shape)) return *cached;
    return TableTactic(shape, multiprocessors_);
  }

  absl::Status CheckDevice() override {
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaDeviceSynchronize(), "device"));
    return CudaStatus(cudaGetLastError(), "device");
  }

 private:
  static constexpr Tactic kDefaultShapeTactic{8, 128, 64, 1, 0};

  static absl::Status ValidateLayerShape(int groups, int n, int k) {
    if (groups < 1 || n < 1) {
      return absl::InvalidArgumentError(fmt::format("groups and N must be >= 1, got {} and {}", groups, n));
    }
    if (k < kBlockK || k % kBlockK != 0) {
      return absl::InvalidArgumentError(fmt::format("K must be a positive multiple of {}, got {}", kBlockK, k));
    }
    if ((long long)n * k > std::numeric_limits<int32_t>::max() ||
        (long long)groups * n * k / 2 > (1ll << 40)) {
      return absl::InvalidArgumentError(fmt::format("layer {} x {} x {} is too large", groups, n, k));
    }
    return absl::OkStatus();
  }

  // Prepare's body: the codes and scale bytes from the host.
  absl::StatusOr<std::unique_ptr<PreparedLayer>> PrepareFrom(int groups, int n, int k, const uint8_t* codes,
                                                            size_t codes_given, std::span<const uint8_t> scale_bytes) {
    MXDIFF_RETURN_IF_ERROR(ValidateLayerShape(groups, n, k));
    const size_t code_count = size_t(groups) * n * (k / 2);
    const size_t scale_count = size_t(groups) * n * (k / kBlockK);
    if (codes_given != code_count || scale_bytes.size() != scale_count) {
      return absl::InvalidArgumentError(
          fmt::format("layer {} x {} x {} needs {} code bytes and {} scale bytes, got {} and {}", groups, n, k,
                      code_count, scale_count, codes_given, scale_bytes.size()));
    }
    MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    const AdmittedScales admitted = AdmittedScales::Admit(scale_bytes, /*per_expert=*/0);  // the whole layer
    auto layer = std::make_unique<DeviceLayer>(device_, groups, n, k, admitted.layer());
    MXDIFF_RETURN_IF_ERROR(layer->codes.Allocate(code_count, "weight codes"));
    MXDIFF_RETURN_IF_ERROR(layer->codes.Upload(codes, code_count, 0, stream_, "copy codes"));
    MXDIFF_RETURN_IF_ERROR(layer->prepared_scales.Allocate(scale_count, admitted.layer()));
    MXDIFF_RETURN_IF_ERROR(layer->prepared_scales.Write(admitted, 0, stream_));
    return std::unique_ptr<PreparedLayer>(std::move(layer));
  }

  absl::StatusOr<const DeviceLayer*> Own(const PreparedLayer& layer) const {
    const auto* device_layer = dynamic_cast<const DeviceLayer*>(&layer);
    if (device_layer == nullptr) return absl::InvalidArgumentError("the layer was not prepared by a CUDA runner");
    if (device_layer->device() != device_) {
      return absl::InvalidArgumentError(fmt::format("the layer was prepared on CUDA device {}, this runner runs on {}",
                                                    device_layer->device(), device_));
    }
    return device_layer;
  }

  // The route first (one authority: route.h), then the launch plan of exactly that tactic.
  absl::StatusOr<std::pair<Route, LaunchPlan>> RouteAndPlan(const DeviceLayer& layer,
                                                            std::span<const int32_t> row_offsets,
                                                            const RunRequest& request) const {
    if (row_offsets.size() != size_t(layer.groups()) + 1) {
      return absl::InvalidArgumentError(fmt::format("row_offsets has {} entries, {} groups need {}",
                                                    row_offsets.size(), layer.groups(), layer.groups() + 1));
    }
    const Tactic tactic = request.tactic ? *request.tactic : DefaultTactic(layer.n(), layer.k(), row_offsets);
    absl::StatusOr<Route> route = DecideRoute(registry_, tactic, request.transform, request.policy,
                                              layer.admission().admitted, layer.admission().Describe());
    if (!route.ok()) return route.status();
    MXDIFF_RETURN_IF_ERROR(registry_.CheckLaunchable(route->tactic, route->variant));
    absl::StatusOr<LaunchPlan> plan = PlanLaunch(route->tactic, layer.groups(), layer.n(), layer.k(), row_offsets);
    if (!plan.ok()) return plan.status();
    return std::pair{*std::move(route), *plan};
  }

  absl::Status Launch(const DeviceLayer& layer, const Route& route, const LaunchPlan& plan,
                      std::span<const int32_t> row_offsets, const int32_t* device_row_offsets,
                      const uint16_t* activations, uint16_t* output, cudaStream_t stream) {
    // Launches on one stream share its split-K workspace in order; two streams never share one.
    Workspace& workspace = workspaces_[stream];
    bool grown = false;
    MXDIFF_RETURN_IF_ERROR(
        workspace.semaphores.Reserve(plan.semaphore_count * sizeof(int32_t), "split-K semaphores", &grown));
    if (grown || workspace.semaphores_dirty) {
      // Semaphores start at zero; a completed launch leaves them so, a failed one may not.
      MXDIFF_RETURN_IF_ERROR(workspace.semaphores.Fill(0, stream, "clear split-K semaphores"));
      workspace.semaphores_dirty = false;
    }
    MXDIFF_RETURN_IF_ERROR(workspace.partials.Reserve(plan.partial_bytes, "split-K partials"));
    // The plan RouteAndPlan made: the tactic is validated and the plan computed once per run.
    const absl::Status status = LaunchPlannedGroupedGemm(DeviceGemmArgs{.transform = route.variant,
                                                                 .tactic = route.tactic,
                                                                 .groups = layer.groups(),
                                                                 .n = layer.n(),
                                                                 .k = layer.k(),
                                                                 .row_offsets = row_offsets,
                                                                 .device_row_offsets = device_row_offsets,
                                                                 .activations = activations,
                                                                 .codes = layer.code_data(),
                                                                 .scales = layer.scales(route.variant),
                                                                 .output = output,
                                                                 .semaphores = workspace.semaphores.as<int>(),
                                                                 .semaphore_count =
                                                                     workspace.semaphores.bytes() / sizeof(int32_t),
                                                                 .partials = workspace.partials.as<float>(),
                                                                 .partial_bytes = workspace.partials.bytes(),
                                                                 .stream = stream},
                                                                 plan);
    if (!status.ok() && status.code() != absl::StatusCode::kInvalidArgument) workspace.semaphores_dirty = true;
    return status;
  }

  int device_;
  std::string name_;
  int multiprocessors_;
  KernelRegistry registry_;
  cudaStream_t stream_;
  TacticCache cache_;
  DeviceBuffer staged_offsets_;
  DeviceBuffer staged_activations_;
  DeviceBuffer staged_output_;
  struct Workspace {  // split-K
    DeviceBuffer semaphores;
    DeviceBuffer partials;
    bool semaphores_dirty = false;
  };
  std::map<cudaStream_t, Workspace> workspaces_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedLayer>> GemmRunner::PrepareAudited(int groups, int n, int k,
                                                                         std::span<const uint8_t> packed_codes,
                                                                         std::span<const uint8_t> scale_bytes,
                                                                         const AuditedLayerVerdict& verdict) {
  MXDIFF_RETURN_IF_ERROR(CheckAuditedVerdict(verdict, groups, n, k, scale_bytes));
  absl::StatusOr<std::unique_ptr<PreparedLayer>> layer = Prepare(groups, n, k, packed_codes, scale_bytes);
  if (layer.ok() && (*layer)->admission().admitted != verdict.admitted) {
    return absl::InternalError(fmt::format("layer '{}': Prepare's admission ({}) differs from the checked verdict",
                                           verdict.layer, (*layer)->admission().Describe()));
  }
  return layer;
}

absl::StatusOr<std::unique_ptr<GemmRunner>> GemmRunner::Create(int device) {
  return CreateWithRegistry(device, BuiltinKernelRegistry());
}

absl::StatusOr<std::unique_ptr<GemmRunner>> GemmRunner::CreateWithRegistry(int device, KernelRegistry registry) {
  const KernelRegistry builtin = BuiltinKernelRegistry();
  for (const Tactic& tactic : registry.OrdinaryTactics()) {
    if (!builtin.Has(tactic, Transform::kOrdinary)) {
      return absl::InvalidArgumentError(fmt::format("no ordinary kernel {} in this build", TacticName(tactic)));
    }
  }
  // A subset of the kernels launches no wider a swizzle than the kernels themselves take.
  registry = registry.WithSwizzleLimit(builtin.max_swizzle());
  int count = 0;
  const cudaError_t count_error = cudaGetDeviceCount(&count);
  if (count_error != cudaSuccess || count == 0) {
    cudaGetLastError();
    return absl::UnavailableError(fmt::format("cudaGetDeviceCount: {}", count_error != cudaSuccess
                                                                             ? cudaGetErrorString(count_error)
                                                                             : "no device"));
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(fmt::format("CUDA device {} does not exist ({} found)", device, count));
  }
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "cudaSetDevice"));
  cudaDeviceProp properties{};
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties"));
  if (properties.major * 10 + properties.minor < 70) {
    return absl::UnavailableError(fmt::format("{} is sm_{}{}: m8n8k4 needs sm_70 or later", properties.name,
                                              properties.major, properties.minor));
  }
  cudaStream_t stream = nullptr;
  MXDIFF_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  return std::unique_ptr<GemmRunner>(std::make_unique<CudaGemmRunner>(
      device, properties.name, properties.multiProcessorCount, std::move(registry), stream));
}

}  // namespace mxdiff
