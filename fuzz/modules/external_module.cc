#include "fuzz/modules/external_module.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "fmt/format.h"
#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "reference/admission.h"
#include "reference/split_plan.h"

namespace mxdiff::fuzz {
namespace {

constexpr std::string_view kFailureKindPayload = "mxdiff/kernel-failure-kind";

// "activations: 3 of 4096 elements changed, the first [17]: 0x0001 -> 0x0000" for each input the
// kernel changed; "" where it left them all as they were.
template <typename T>
void DescribeChange(std::string_view input, const std::vector<T>& before, const std::vector<T>& after,
                    std::string& text) {
  if (before == after) return;  // memcmp speed: this runs after every run
  if (before.size() != after.size()) {
    text += fmt::format("{}{}: {} elements, now {}", text.empty() ? "" : "; ", input, before.size(), after.size());
    return;
  }
  const size_t first = size_t(std::mismatch(before.begin(), before.end(), after.begin()).first - before.begin());
  size_t changed = 0;
  for (size_t i = first; i < before.size(); ++i) changed += before[i] != after[i];
  text += fmt::format("{}{}: {} of {} elements changed, the first [{}]: 0x{:x} -> 0x{:x}", text.empty() ? "" : "; ",
                      input, changed, before.size(), first, before[first], after[first]);
}

class ExternalModule final : public GemmModule {
 public:
  ExternalModule(void* handle, const mxdiff_kernel* kernel) : handle_(handle), kernel_(kernel) {}
  ~ExternalModule() override { dlclose(handle_); }

  std::string name() const override { return fmt::format("ext-{}", kernel_->name); }
  std::optional<StepModel> model() const override { return std::nullopt; }
  // The kernel gets the case's host buffers through const pointers, which it can cast away: it
  // runs on a private copy (never the case's own buffers, which the reference, the other modules
  // and the next case's materialization read), made again only after a run changed it, and
  // compared with the case after each run.
  CaseRun RunCase(const FuzzCase& c, const LayerAdmission& admission, std::span<uint16_t> output,
                  std::span<uint16_t> again_output) override {
    CaseRun run;
    run.tactic = c.tactic;
    run.expected = ExpectedRoute(c, run.tactic, admission);
    run.inputs_changed.emplace();
    inputs_ = c;  // the vectors keep their capacity across cases
    run.route = Run(inputs_, run.tactic, output);
    run.ran_plan = reported_plan_;
    const bool changed = NoteChanges(c, *run.inputs_changed);
    if (!run.route.ok()) return run;
    if (changed) inputs_ = c;
    run.again_tactic = run.tactic;  // no other tile order to ask for
    run.again = Run(inputs_, run.again_tactic, again_output);
    run.again_plan = reported_plan_;
    NoteChanges(c, *run.inputs_changed);
    return run;
  }

  absl::StatusOr<Route> Run(const FuzzCase& c, const Tactic& tactic, std::span<uint16_t> output) override {
    reported_plan_.reset();
    absl::StatusOr<Route> route = ExpectedRoute(c, tactic, AdmitLayer(c.scale_bytes));
    if (!route.ok()) return route.status();
    // The requested plan, as the reference reads it: a kernel that leaves it reports running it.
    mxdiff_plan ran_plan{};
    ran_plan.cta_k = tactic.cta_k;
    ran_plan.splits = effective_splits(c.k, tactic.cta_k, tactic.splits);
    const mxdiff_problem problem{c.groups,
                                 c.n,
                                 c.k,
                                 c.row_offsets.data(),
                                 c.activations.data(),
                                 c.packed_codes.data(),
                                 c.scale_bytes.data(),
                                 int32_t(route->variant),
                                 tactic.cta_k,
                                 tactic.splits,
                                 int32_t(c.model),
                                 &ran_plan};
    char message[256] = {0};
    const int code = kernel_->run(&problem, output.data(), message, sizeof message);
    message[sizeof message - 1] = '\0';
    if (code == MXDIFF_KERNEL_OK) {
      // A version 1 kernel's struct ends before ran_plan: whatever is there is not its report.
      if (kernel_->abi_version >= 2) {
        // An unterminated label keeps all its bytes, so the check names it (PlanOfReport).
        reported_plan_ = RanPlan{ran_plan.cta_k, ran_plan.splits,
                                 std::string(ran_plan.kernel, strnlen(ran_plan.kernel, sizeof ran_plan.kernel))};
      }
      return route;
    }
    if (code == MXDIFF_KERNEL_UNSUPPORTED) return absl::UnimplementedError(message);
    absl::Status failed = absl::InternalError(fmt::format("{} returned {}: {}", name(), code, message));
    if (const std::string_view kind = KernelFailureKind(message); !kind.empty()) {
      failed.SetPayload(std::string(kFailureKindPayload), absl::Cord(std::string(kind)));
    }
    return failed;
  }

  std::optional<RanPlan> ReportedPlan() const override { return reported_plan_; }

 private:
  // The harness routes for the external kernel by the rules of kernels/route.h, as if both
  // variants of the case's tactic were instantiated; the kernel computes what the route says.
  absl::StatusOr<Route> ExpectedRoute(const FuzzCase& c, const Tactic& tactic, const LayerAdmission& admission) const {
    KernelRegistry registry;
    registry.Add(tactic, Transform::kOrdinary);
    registry.Add(tactic, Transform::kFolded);
    return DecideRoute(registry, tactic, c.request, c.policy, admission.admitted, admission.Describe());
  }

  // Whether the last run changed the private copy; the first change seen is kept in `changes`.
  bool NoteChanges(const FuzzCase& c, std::string& changes) const {
    std::string changed;
    DescribeChange("row_offsets", c.row_offsets, inputs_.row_offsets, changed);
    DescribeChange("activations", c.activations, inputs_.activations, changed);
    DescribeChange("packed_codes", c.packed_codes, inputs_.packed_codes, changed);
    DescribeChange("scale_bytes", c.scale_bytes, inputs_.scale_bytes, changed);
    if (changes.empty()) changes = changed;
    return !changed.empty();
  }

  void* handle_;
  const mxdiff_kernel* kernel_;
  std::optional<RanPlan> reported_plan_;  // of the last Run (version 2 kernels)
  FuzzCase inputs_;                       // the private copy RunCase hands the kernel
};

}  // namespace

bool FileNameSafe(std::string_view name) {
  return name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char ch) {
           return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                  ch == '_' || ch == '-';
         });
}

std::string_view KernelFailureKind(std::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == std::string_view::npos || colon == 0) return {};
  const std::string_view kind = message.substr(0, colon);
  bool word_start = true;
  int words = 1;
  for (const char ch : kind) {
    if (ch == '/') {
      if (word_start) return {};  // an empty word
      word_start = true;
      ++words;
      continue;
    }
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_')) return {};
    word_start = false;
  }
  return word_start || words < 2 ? std::string_view() : kind;
}

std::string FailureKindOf(const absl::Status& status) {
  const auto kind = status.GetPayload(std::string(kFailureKindPayload));
  return kind ? std::string(*kind) : std::string();
}

absl::StatusOr<std::unique_ptr<GemmModule>> LoadExternalModule(const std::string& library_path) {
  void* handle = dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::NotFoundError(fmt::format("cannot load external kernel {}: {}", library_path, dlerror()));
  }
  auto entry = reinterpret_cast<mxdiff_kernel_entry_fn>(dlsym(handle, MXDIFF_KERNEL_ENTRY_SYMBOL));
  const mxdiff_kernel* kernel = entry != nullptr ? entry() : nullptr;
  std::string problem;
  if (entry == nullptr) problem = fmt::format("no symbol {}", MXDIFF_KERNEL_ENTRY_SYMBOL);
  else if (kernel == nullptr) problem = fmt::format("{}() returned null", MXDIFF_KERNEL_ENTRY_SYMBOL);
  else if (kernel->abi_version < MXDIFF_KERNEL_ABI_OLDEST_VERSION || kernel->abi_version > MXDIFF_KERNEL_ABI_VERSION)
    problem = fmt::format("ABI version {}, this build speaks {} to {}", kernel->abi_version,
                          MXDIFF_KERNEL_ABI_OLDEST_VERSION, MXDIFF_KERNEL_ABI_VERSION);
  else if (kernel->run == nullptr || kernel->name == nullptr || *kernel->name == '\0')
    problem = "descriptor without a name or run function";
  else if (!FileNameSafe(kernel->name))
    problem = fmt::format("kernel name \"{}\" is not file-name safe ([A-Za-z0-9._-], at most 64): it names "
                          "findings and the campaign's counts", absl::CHexEscape(kernel->name));
  if (!problem.empty()) {
    dlclose(handle);
    return absl::FailedPreconditionError(fmt::format("external kernel {}: {}", library_path, problem));
  }
  return std::unique_ptr<GemmModule>(new ExternalModule(handle, kernel));
}

}  // namespace mxdiff::fuzz
