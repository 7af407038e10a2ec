#include "tools/repro/layer_repro.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "fmt/core.h"
#include "fuzz/driver/findings.h"
#include "fuzz/formats/layer_case_format.h"
#include "fuzz/checks/layer_target.h"
#include "reference/admission.h"
#include "reference/hash.h"

namespace mxdiff::repro {

bool IsLayerCase(std::span<const uint8_t> bytes) {
  return bytes.size() >= 4 && std::memcmp(bytes.data(), fuzz::kLayerCaseMagic, 4) == 0;
}

int ReproLayerCase(const std::string& path, std::span<const uint8_t> bytes, bool emit,
                   const std::string& regressions_dir) {
  const absl::StatusOr<fuzz::LayerCase> c = fuzz::DecodeLayerCase(bytes);
  if (!c.ok()) {
    fmt::print(stderr, "repro: {} is not a valid layer case: {}\n", path, c.status().ToString());
    return 2;
  }
  fmt::print("{}\n{}", path, fuzz::DescribeLayerCase(*c));
  fuzz::LayerDifferential differential(/*use_device=*/true);
  fmt::print("device: {}\n", differential.device_available()
                                 ? fmt::format("{} ({})", differential.device()->name,
                                               StepModelName(differential.device()->model))
                                 : "none (" + differential.device().status().ToString() + "): the CPU side only");
  const fuzz::CheckResult finding = differential.CheckCase(*c);
  if (finding) {
    fmt::print("fuzz_layer FINDING {}\n  {}\n", finding->signature, finding->description);
  } else {
    fmt::print("fuzz_layer ok ({} replays compared on the device)\n", differential.replays_compared());
  }
  if (emit) {
    const std::filesystem::path dir = std::filesystem::path(regressions_dir).parent_path() / "fuzz_layer";
    const uint64_t hash = Fnv1a64(bytes);
    const std::filesystem::path file =
        dir / fmt::format("regression-{}.{:016x}.case", fuzz::SignatureStem(finding ? finding->signature : "clean"), hash);
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    out.close();  // a write error (a full disk) shows at the flush
    if (!out) {
      fmt::print(stderr, "repro: --emit failed: cannot write {}\n", file.string());
      return 2;
    }
    fmt::print("\nemitted {}\n", file.string());
  }
  return finding ? 1 : 0;
}

}  // namespace mxdiff::repro
