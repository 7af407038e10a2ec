#include "checkpoint/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <system_error>

#include "fmt/core.h"
#include "checkpoint/strict_json.h"

namespace mxdiff::checkpoint {
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

  // Every tensor the index puts in `shard` as unread, for `why`.
  void MarkUnread(const std::string& index, const std::string& shard, const std::vector<std::string>& tensors,
                  const std::string& why) {
    for (const std::string& tensor : tensors) checkpoint.unread.emplace(tensor, UnreadTensor{index, shard, why});
  }

  // The *.safetensors files of a folder (regular files), sorted; false (and an error) when the
  // folder cannot be listed.
  bool ListFolder(const std::string& path, std::vector<std::string>& indexes, std::vector<std::string>& shards) {
    std::error_code error;
    for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (!it->is_regular_file(error)) continue;
      if (EndsWith(name, kIndexSuffix)) indexes.push_back(it->path().string());
      if (EndsWith(name, kShardSuffix)) shards.push_back(it->path().string());
    }
    if (error) {
      Fail(AuditError{path, "", fmt::format("{}: cannot list the folder: {}", path, error.message())});
      return false;
    }
    std::sort(indexes.begin(), indexes.end());
    std::sort(shards.begin(), shards.end());
    return true;
  }

  void LoadShards(const std::string& folder, const std::vector<std::string>& shards) {
    if (shards.empty()) {
      return Fail(AuditError{folder, "", fmt::format("{}: the folder has no *.safetensors file and no index", folder)});
    }
    for (const std::string& shard : shards) {
      if (Stop()) return;
      LoadFile(shard);
    }
  }

  // The index's entries that cannot be followed: each an error and its tensor unread. False
  // when the audit stops.
  bool RecordEntryErrors(const std::string& path, const ShardIndex& index, std::vector<AuditError>& entry_errors) {
    for (AuditError& error : entry_errors) {
      // The entry's own message without the "FILE: tensor NAME: " its error starts with.
      const std::string prefix = fmt::format("{}: tensor {}: ", path, Quoted(error.tensor));
      checkpoint.unread.emplace(
          error.tensor,
          UnreadTensor{path, index.unfollowed.at(error.tensor),
                       error.message.starts_with(prefix) ? error.message.substr(prefix.size()) : error.message});
      Fail(std::move(error));
      if (Stop()) return false;
    }
    return true;
  }

  // A shard the index names that is missing or not a regular file: its tensors unread, one error.
  void FailMissingShard(const std::string& path, const std::string& shard, const std::string& shard_path,
                        const std::vector<std::string>& tensors) {
    std::error_code error;
    const bool exists = fs::exists(fs::symlink_status(shard_path, error));
    const std::string message =
        fmt::format("{}: tensor {}: its shard {} is {}: {} {} (the index puts {} tensor{} there)", path,
                    Quoted(tensors.front()), Quoted(shard), exists ? "not a regular file" : "missing", shard_path,
                    exists ? "is a folder, device, FIFO or broken link" : "does not exist", tensors.size(),
                    tensors.size() == 1 ? "" : "s");
    MarkUnread(path, shard_path, tensors,
               fmt::format("its shard {} is {}", shard_path, exists ? "not a regular file" : "missing"));
    Fail(AuditError{path, tensors.front(), message});
  }

  // A loaded shard against the index: every tensor the index puts there is in it, and every
  // tensor in it is put there by the index. False when the audit stops.
  bool CheckShardAgainstIndex(const std::string& path, const ShardIndex& index, const std::string& shard,
                              const std::string& shard_path, const std::vector<std::string>& tensors,
                              const CheckpointFile& file) {
    for (const std::string& tensor : tensors) {
      if (file.header.Find(tensor) == nullptr) {
        checkpoint.unread.emplace(
            tensor, UnreadTensor{path, shard_path,
                                 fmt::format("the index puts it in {}, which has no such tensor", shard_path)});
        Fail(AuditError{path, tensor,
                        fmt::format("{}: tensor {}: the index puts it in {}, which has no such tensor", path,
                                    Quoted(tensor), shard_path)});
        if (Stop()) return false;
      }
    }
    for (const TensorInfo& tensor : file.header.tensors) {
      const auto entry = index.weight_map.find(tensor.name);
      if (entry == index.weight_map.end()) {
        Fail(AuditError{shard_path, tensor.name,
                        fmt::format("{}: tensor {}: not in the index {}", shard_path, Quoted(tensor.name), path)});
      } else if (entry->second != shard) {
        Fail(AuditError{shard_path, tensor.name,
                        fmt::format("{}: tensor {}: the index puts it in {}, not here ({})", shard_path,
                                    Quoted(tensor.name), Quoted(entry->second), path)});
      }
      if (Stop()) return false;
    }
    return true;
  }

  // Shards in name order, each with the tensors the index puts there; the canonical paths of
  // the shards named go to indexed_paths. False when the audit stops.
  bool LoadIndexedShards(const std::string& path, const fs::path& folder, const ShardIndex& index,
                         std::set<std::string>& indexed_paths) {
    std::map<std::string, std::vector<std::string>> shards;
    for (const auto& [tensor, shard] : index.weight_map) shards[shard].push_back(tensor);
    for (const auto& [shard, tensors] : shards) {
      if (Stop()) return false;
      const std::string shard_path = (folder / shard).string();
      std::error_code error;
      indexed_paths.insert(fs::weakly_canonical(shard_path, error).string());
      if (!fs::is_regular_file(shard_path, error)) {
        FailMissingShard(path, shard, shard_path, tensors);
        continue;
      }
      const std::optional<size_t> loaded = LoadFile(shard_path);
      if (!loaded) {
        MarkUnread(path, shard_path, tensors, fmt::format("its shard {} could not be read", shard_path));
        continue;
      }
      if (!CheckShardAgainstIndex(path, index, shard, shard_path, tensors, checkpoint.files[*loaded])) return false;
    }
    return true;
  }

  // *.safetensors files beside the index that it does not name: no part of the checkpoint it
  // describes, but not to be passed over in silence (RunAudit audits each on its own).
  void RecordUnindexedFiles(const std::string& path, const std::string& folder_name, const ShardIndex& index,
                            const std::set<std::string>& indexed_paths) {
    std::vector<std::string> beside;
    std::error_code error;
    for (fs::directory_iterator it(folder_name, error), end; !error && it != end; it.increment(error)) {
      if (it->is_regular_file(error) && EndsWith(it->path().filename().string(), kShardSuffix)) {
        beside.push_back(it->path().string());
      }
    }
    std::sort(beside.begin(), beside.end());
    for (const std::string& file : beside) {
      std::error_code canonical_error;
      if (indexed_paths.contains(fs::weakly_canonical(file, canonical_error).string())) continue;
      UnindexedFile unindexed{file, path, std::nullopt, std::nullopt, ""};
      absl::StatusOr<SafetensorsHeader> header = ReadSafetensorsHeader(file);
      if (header.ok()) {
        unindexed.tensors = header->tensors.size();
        size_t named = 0;
        for (const TensorInfo& tensor : header->tensors) named += index.weight_map.contains(tensor.name) ? 1 : 0;
        unindexed.also_in_index = named;
      } else {
        unindexed.error = std::string(header.status().message());
      }
      checkpoint.unindexed.push_back(std::move(unindexed));
    }
  }

  // One rule for every problem of an index (README): the audit goes on with what can be read,
  // and a tensor the index names whose bytes cannot be read refuses its kernel layer.
  void LoadIndex(const std::string& path) {
    const fs::path folder = fs::path(path).parent_path();
    const std::string folder_name = folder.empty() ? std::string(".") : folder.string();
    std::vector<AuditError> entry_errors;
    absl::StatusOr<std::string> text = ReadSmallFile(path, kMaxIndexBytes);
    absl::StatusOr<ShardIndex> index = text.ok() ? ParseShardIndex(path, *text, &entry_errors) : text.status();
    if (!index.ok()) {
      Fail(ErrorOf(path, index.status()));
      // An index that cannot be read names nothing: what can be read is its folder's files.
      if (Stop()) return;
      std::vector<std::string> indexes, shards;
      if (ListFolder(folder_name, indexes, shards)) LoadShards(folder_name, shards);
      return;
    }
    if (!RecordEntryErrors(path, *index, entry_errors)) return;
    std::set<std::string> indexed_paths;  // canonical
    if (!LoadIndexedShards(path, folder, *index, indexed_paths)) return;
    if (Stop()) return;
    RecordUnindexedFiles(path, folder_name, *index, indexed_paths);
  }

  void LoadFolder(const std::string& path) {
    std::vector<std::string> indexes, shards;
    if (!ListFolder(path, indexes, shards)) return;
    if (indexes.size() > 1) {
      return Fail(AuditError{path, "", fmt::format("{}: the folder holds {} index files ({}, {}, ...): name one", path,
                                                   indexes.size(), indexes[0], indexes[1])});
    }
    if (indexes.size() == 1) return LoadIndex(indexes[0]);
    LoadShards(path, shards);
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

absl::StatusOr<ShardIndex> ParseShardIndex(std::string_view file, std::string_view text,
                                           std::vector<AuditError>* entry_errors) {
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
    absl::Status entry = absl::OkStatus();
    if (!shard.is_string()) {
      entry = TensorError(file, tensor, "its shard is not a string");
    } else if (!SafeShardName(shard.get<std::string>())) {
      entry = TensorError(file, tensor,
                          fmt::format("shard {} is not a file name inside the index's folder",
                                      Quoted(shard.get<std::string>())));
    }
    if (entry.ok()) {
      index.weight_map.emplace(tensor, shard.get<std::string>());
      continue;
    }
    if (entry_errors == nullptr) return entry;
    entry_errors->push_back(ErrorOf(file, entry));
    index.unfollowed.emplace(tensor, shard.is_string() ? shard.get<std::string>()
                                                       : shard.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  if (index.weight_map.empty() && index.unfollowed.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: \"weight_map\" is empty", file));
  }
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
  // A file beside an index that is also a PATH of its own is audited as such, and a folder
  // named twice lists its files once.
  std::set<std::string> listed;
  std::erase_if(checkpoint.unindexed, [&](const UnindexedFile& file) {
    std::error_code error;
    const std::string canonical = fs::weakly_canonical(file.file, error).string();
    return loader.seen.contains(canonical) || !listed.insert(canonical).second;
  });
  return checkpoint;
}

}  // namespace mxdiff::checkpoint
