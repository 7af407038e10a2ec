#include "tools/audit/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <system_error>

#include "fmt/core.h"
#include "tools/audit/strict_json.h"

namespace mxdiff::audit {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kIndexSuffix = ".safetensors.index.json";
constexpr std::string_view kShardSuffix = ".safetensors";
constexpr uintmax_t kMaxIndexBytes = 256u << 20;

bool EndsWith(std::string_view text, std::string_view suffix) { return text.ends_with(suffix); }

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, uintmax_t limit) {
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  if (error) return absl::NotFoundError(fmt::format("{}: cannot read: {}", path, error.message()));
  if (size > limit) {
    return absl::InvalidArgumentError(fmt::format("{}: {} bytes, more than an index file can be ({})", path, size, limit));
  }
  std::ifstream stream(path, std::ios::binary);
  if (!stream) return absl::NotFoundError(fmt::format("{}: cannot open", path));
  return std::string(std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>());
}

// A shard named by an index must be a plain relative path inside the index's folder.
bool SafeShardName(const std::string& name) {
  if (name.empty() || name.front() == '/' || name.find('\0') != std::string::npos) return false;
  for (const fs::path& part : fs::path(name)) {
    if (part == "..") return false;
  }
  return true;
}

struct Loader {
  Checkpoint& checkpoint;
  bool keep_going;
  std::map<std::string, std::optional<size_t>> seen;  // canonical path -> its file, if it loaded

  bool Stop() const { return !keep_going && !checkpoint.errors.empty(); }

  void Fail(AuditError error) { checkpoint.errors.push_back(std::move(error)); }

  // Reads one safetensors file (once, however often it is named); its index in files.
  std::optional<size_t> LoadFile(const std::string& path) {
    std::error_code error;
    const std::string canonical = fs::weakly_canonical(path, error).string();
    const auto [it, first_time] = seen.emplace(error ? path : canonical, std::nullopt);
    if (!first_time) return it->second;
    absl::StatusOr<SafetensorsHeader> header = ReadSafetensorsHeader(path);
    if (!header.ok()) {
      Fail(ErrorOf(path, header.status()));
      return std::nullopt;
    }
    AddCheckpointFile(checkpoint, path, *std::move(header));
    it->second = checkpoint.files.size() - 1;
    return it->second;
  }

  void LoadIndex(const std::string& path) {
    absl::StatusOr<std::string> text = ReadSmallFile(path, kMaxIndexBytes);
    if (!text.ok()) return Fail(ErrorOf(path, text.status()));
    absl::StatusOr<ShardIndex> index = ParseShardIndex(path, *text);
    if (!index.ok()) return Fail(ErrorOf(path, index.status()));
    const fs::path folder = fs::path(path).parent_path();
    // Shards in name order, each with the tensors the index puts there.
    std::map<std::string, std::vector<std::string>> shards;
    for (const auto& [tensor, shard] : index->weight_map) shards[shard].push_back(tensor);
    for (const auto& [shard, tensors] : shards) {
      if (Stop()) return;
      const std::string shard_path = (folder / shard).string();
      std::error_code error;
      if (!fs::is_regular_file(shard_path, error)) {
        Fail(AuditError{path, tensors.front(),
                        fmt::format("{}: tensor {}: its shard {} is missing: {} does not exist (the index puts {} "
                                    "tensor{} there)",
                                    path, Quoted(tensors.front()), Quoted(shard), shard_path, tensors.size(),
                                    tensors.size() == 1 ? "" : "s")});
        continue;
      }
      const std::optional<size_t> loaded = LoadFile(shard_path);
      if (!loaded) continue;
      const CheckpointFile& file = checkpoint.files[*loaded];
      for (const std::string& tensor : tensors) {
        if (file.header.Find(tensor) == nullptr) {
          Fail(AuditError{path, tensor,
                          fmt::format("{}: tensor {}: the index puts it in {}, which has no such tensor", path,
                                      Quoted(tensor), shard_path)});
          if (Stop()) return;
        }
      }
      for (const TensorInfo& tensor : file.header.tensors) {
        if (!index->weight_map.contains(tensor.name)) {
          Fail(AuditError{shard_path, tensor.name,
                          fmt::format("{}: tensor {}: not in the index {}", shard_path, Quoted(tensor.name), path)});
          if (Stop()) return;
        }
      }
    }
  }

  void LoadFolder(const std::string& path) {
    std::vector<std::string> indexes, shards;
    std::error_code error;
    for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (!it->is_regular_file(error)) continue;
      if (EndsWith(name, kIndexSuffix)) indexes.push_back(it->path().string());
      if (EndsWith(name, kShardSuffix)) shards.push_back(it->path().string());
    }
    if (error) return Fail(AuditError{path, "", fmt::format("{}: cannot list the folder: {}", path, error.message())});
    std::sort(indexes.begin(), indexes.end());
    std::sort(shards.begin(), shards.end());
    if (indexes.size() > 1) {
      return Fail(AuditError{path, "", fmt::format("{}: the folder holds {} index files ({}, {}, ...): name one", path,
                                                   indexes.size(), indexes[0], indexes[1])});
    }
    if (indexes.size() == 1) return LoadIndex(indexes[0]);
    if (shards.empty()) {
      return Fail(AuditError{path, "", fmt::format("{}: the folder has no *.safetensors file and no index", path)});
    }
    for (const std::string& shard : shards) {
      if (Stop()) return;
      LoadFile(shard);
    }
  }

  void Load(const std::string& path) {
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    if (error || !fs::exists(status)) {
      return Fail(AuditError{path, "", fmt::format("{}: no such file or folder", path)});
    }
    if (fs::is_directory(status)) return LoadFolder(path);
    if (EndsWith(path, ".json")) return LoadIndex(path);
    LoadFile(path);
  }
};

}  // namespace

const TensorInfo* Checkpoint::Find(std::string_view name, TensorRef* ref) const {
  const auto found = by_name.find(std::string(name));
  if (found == by_name.end()) return nullptr;
  if (ref != nullptr) *ref = found->second;
  return &tensor(found->second);
}

std::string Checkpoint::FilesOf(const std::string& name) const {
  std::string text;
  const auto found = copies.find(name);
  if (found == copies.end()) return text;
  for (const TensorRef& ref : found->second) text += (text.empty() ? "" : ", ") + files[ref.file].path;
  return text;
}

absl::StatusOr<ShardIndex> ParseShardIndex(std::string_view file, std::string_view text) {
  // The index's "metadata" may hold small objects of its own: allow a few levels.
  absl::StatusOr<json> parsed = ParseStrictJson(file, text, 8, /*tensor_key_depth=*/2);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) return absl::InvalidArgumentError(fmt::format("{}: not a JSON object", file));
  const auto map = parsed->find("weight_map");
  if (map == parsed->end() || !map->is_object()) {
    return absl::InvalidArgumentError(fmt::format("{}: no \"weight_map\" object (not a sharded checkpoint's index?)", file));
  }
  ShardIndex index;
  for (const auto& [tensor, shard] : map->items()) {
    if (!shard.is_string()) {
      return TensorError(file, tensor, "its shard is not a string");
    }
    if (!SafeShardName(shard.get<std::string>())) {
      return TensorError(file, tensor,
                         fmt::format("shard {} is not a file name inside the index's folder",
                                     Quoted(shard.get<std::string>())));
    }
    index.weight_map.emplace(tensor, shard.get<std::string>());
  }
  if (index.weight_map.empty()) return absl::InvalidArgumentError(fmt::format("{}: \"weight_map\" is empty", file));
  return index;
}

void AddCheckpointFile(Checkpoint& checkpoint, std::string path, SafetensorsHeader header) {
  const size_t file_index = checkpoint.files.size();
  for (size_t i = 0; i < header.tensors.size(); ++i) {
    const std::string& name = header.tensors[i].name;
    const auto [it, added] = checkpoint.by_name.emplace(name, TensorRef{file_index, i});
    if (!added) {
      std::vector<TensorRef>& copies = checkpoint.copies[name];
      if (copies.empty()) copies.push_back(it->second);
      copies.push_back(TensorRef{file_index, i});
      checkpoint.errors.push_back(AuditError{
          path, name,
          fmt::format("{}: tensor {}: also in {}: a tensor name may occur once in a checkpoint", path, Quoted(name),
                      checkpoint.files[it->second.file].path)});
    }
  }
  checkpoint.files.push_back(CheckpointFile{std::move(path), std::move(header)});
}

Checkpoint LoadCheckpoint(const std::vector<std::string>& paths, bool keep_going) {
  Checkpoint checkpoint;
  checkpoint.inputs.assign(paths.begin(), paths.end());
  Loader loader{checkpoint, keep_going, {}};
  for (const std::string& path : paths) {
    if (loader.Stop()) break;
    loader.Load(path);
  }
  return checkpoint;
}

}  // namespace mxdiff::audit
