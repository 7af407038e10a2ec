#include "tools/bench/naive_protocol.h"

#include "fmt/format.h"

namespace mxdiff::bench {

absl::StatusOr<NaivePreparation> PrepareNaiveArms(FirstUse mode, BenchArm& a, BenchArm& b,
                                                  const std::function<absl::StatusOr<Tactic>()>& tune,
                                                  BenchArm* a_first_call) {
  NaivePreparation result;
  if (absl::Status status = a.PrepareTiming(kCaptureModeRelaxed, /*launch_once=*/false); !status.ok()) {
    return absl::Status(status.code(), fmt::format("A captured cold: {}", std::string(status.message())));
  }
  result.a_route = a.route();
  if (mode == FirstUse::kTable) {
    absl::StatusOr<Tactic> tuned = tune();
    if (!tuned.ok()) return absl::Status(tuned.status().code(), fmt::format("tuning: {}", std::string(tuned.status().message())));
    result.tuning = fmt::format("then the tactic tuned on B's runner ({})", TacticName(*tuned));
  } else {
    absl::StatusOr<std::vector<uint16_t>> first = (a_first_call != nullptr ? *a_first_call : a).RunSet(0);
    if (!first.ok()) {
      return absl::Status(first.status().code(),
                          fmt::format("A's first call outside a capture: {}", std::string(first.status().message())));
    }
    result.tuning = "then A run once outside a capture, which tuned the shape at its first use";
  }
  if (absl::Status status = b.PrepareTiming(kCaptureModeRelaxed, /*launch_once=*/false); !status.ok()) {
    return absl::Status(status.code(), fmt::format("B captured after tuning: {}", std::string(status.message())));
  }
  result.b_route = b.route();
  return result;
}

}  // namespace mxdiff::bench
