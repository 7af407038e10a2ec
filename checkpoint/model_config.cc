#include "checkpoint/model_config.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "checkpoint/strict_json.h"
#include "reference/moe_layer.h"

namespace mxdiff::checkpoint {
namespace {

constexpr int kV4TopK = 6;
constexpr uintmax_t kMaxConfigBytes = uintmax_t{16} << 20;  // config.json files are kilobytes
constexpr int kMaxConfigDepth = 64;

// The config's num_experts_per_tok, or why there is none (naming the file).
absl::StatusOr<int64_t> ConfiguredTopK(const std::filesystem::path& path) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error) return absl::UnavailableError(fmt::format("{} cannot be read: {}", path.string(), error.message()));
  if (!std::filesystem::is_regular_file(status)) {  // a FIFO would block the read
    return absl::InvalidArgumentError(fmt::format("{} is not a regular file", path.string()));
  }
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error || size > kMaxConfigBytes) {
    return absl::InvalidArgumentError(
        error ? fmt::format("{} cannot be read: {}", path.string(), error.message())
              : fmt::format("{} is {} bytes, more than a config.json's {} MiB", path.string(), size,
                            kMaxConfigBytes >> 20));
  }
  std::ifstream file(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (!file.good() && !file.eof()) return absl::UnavailableError(fmt::format("{} cannot be read", path.string()));
  absl::StatusOr<nlohmann::json> config = checkpoint::ParseStrictJson(path.string(), text, kMaxConfigDepth, -1);
  if (!config.ok()) return absl::InvalidArgumentError(std::string(config.status().message()));
  if (!config->is_object()) return absl::InvalidArgumentError(fmt::format("{} is not a JSON object", path.string()));
  const auto top_k = config->find("num_experts_per_tok");
  if (top_k == config->end()) {
    return absl::NotFoundError(fmt::format("{} has no num_experts_per_tok", path.string()));
  }
  if (!top_k->is_number_integer()) {
    return absl::InvalidArgumentError(fmt::format("{}: num_experts_per_tok is {}, not an integer", path.string(),
                                                  checkpoint::Quoted(top_k->dump(), 40)));
  }
  return top_k->is_number_unsigned() ? int64_t(std::min<uint64_t>(top_k->get<uint64_t>(), INT64_MAX))
                                     : top_k->get<int64_t>();
}

}  // namespace

ModelTopK ReadModelTopK(const std::vector<std::string>& paths, int experts) {
  const std::filesystem::path first(paths.empty() ? "." : paths.front());
  std::error_code error;
  const std::filesystem::path dir = std::filesystem::is_directory(first, error) ? first : first.parent_path();
  const std::filesystem::path path = (dir.empty() ? std::filesystem::path(".") : dir) / "config.json";
  const int most = std::max(1, std::min(experts, kMaxMoeTopK));
  ModelTopK result;
  // DeepSeek V4's top-6, cut to the layer's experts.
  const std::string v4 = kV4TopK <= most ? "DeepSeek V4's top-6"
                                          : fmt::format("DeepSeek V4's top-6, cut to the layer's {} experts", most);
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, error))) {
    result.top_k = std::min(kV4TopK, most);
    result.source = fmt::format("{} (no config.json beside the checkpoint)", v4);
  } else if (const absl::StatusOr<int64_t> configured = ConfiguredTopK(path); !configured.ok()) {
    result.top_k = std::min(kV4TopK, most);
    result.source = fmt::format("{}: {} is used", std::string(configured.status().message()), v4);
  } else {
    result.top_k = int(std::clamp<int64_t>(*configured, 1, most));
    result.source = fmt::format("config.json num_experts_per_tok = {}", *configured);
    if (result.top_k != *configured) {
      result.source += fmt::format(", outside 1..{} (the layer's experts, at most {}): {} is used", most, kMaxMoeTopK,
                                   result.top_k);
    }
  }
  return result;
}

}  // namespace mxdiff::checkpoint
