// What `mxdiff audit PATH...` audits: every PATH is a safetensors file, a folder (its
// `*.safetensors.index.json` if it has one, else all its `*.safetensors` files), or a sharded
// checkpoint's index; together they form one checkpoint, so a tensor name may occur only once.
// Only headers are read here.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/audit_error.h"
#include "checkpoint/safetensors_header.h"

namespace mxdiff::checkpoint {

struct CheckpointFile {
  std::string path;
  SafetensorsHeader header;
};

struct TensorRef {
  size_t file = 0;
  size_t index = 0;  // into files[file].header.tensors
  bool operator==(const TensorRef&) const = default;
};

// A tensor an index names whose bytes could not be read: its shard is missing, unreadable or
// outside the index's folder, or lacks it. Its kernel layer is refused (never left out).
struct UnreadTensor {
  std::string index;  // the index naming it
  std::string shard;  // the shard it names, as a path (as written, for an entry not followed)
  std::string why;    // "its shard ... is missing", ...
};

// A *.safetensors file beside an index that does not name it: no part of the checkpoint the
// index describes, so not among `files`, but reported with what its header holds (RunAudit
// audits it on its own).
struct UnindexedFile {
  std::string file;
  std::string index;
  std::optional<size_t> tensors;        // in its header; unset if the header could not be read
  std::optional<size_t> also_in_index;  // of those, names the index gives (another shard's)
  std::string error;                    // why its header could not be read
};

struct Checkpoint {
  std::vector<std::string> inputs;
  std::vector<CheckpointFile> files;  // the files whose headers are valid
  std::vector<AuditError> errors;
  std::unordered_map<std::string, TensorRef> by_name;  // the first file's, for a name in several
  // Names in more than one file (an error), each with every copy, in the order read: the plan
  // judges them all and refuses the layer, whichever copy came first.
  std::unordered_map<std::string, std::vector<TensorRef>> copies;
  std::map<std::string, UnreadTensor> unread;  // tensor name -> why (keep_going only gets past these)
  std::vector<UnindexedFile> unindexed;

  const TensorInfo& tensor(TensorRef ref) const { return files[ref.file].header.tensors[ref.index]; }
  const TensorInfo* Find(std::string_view name, TensorRef* ref = nullptr) const;
  // "a.safetensors, c.safetensors" for a name in copies.
  std::string FilesOf(const std::string& name) const;
};

// A sharded checkpoint's index: {"metadata": {...}, "weight_map": {"tensor": "shard file", ...}}.
struct ShardIndex {
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name (relative to the index)
  std::map<std::string, std::string> unfollowed;  // entries that cannot be followed (with entry_errors)
};
// Without `entry_errors` any entry that cannot be followed (a shard not a string, or outside the
// index's folder) fails the parse; with it, such entries are reported there (one error each,
// naming the tensor), kept in `unfollowed` and the rest of the index is returned.
absl::StatusOr<ShardIndex> ParseShardIndex(std::string_view file, std::string_view text,
                                           std::vector<AuditError>* entry_errors = nullptr);

// Reads the headers of everything the paths name. Without keep_going it stops at the first
// error; with it, files with errors are left out, the errors kept, and the tensors an index
// names in them recorded as unread.
Checkpoint LoadCheckpoint(const std::vector<std::string>& paths, bool keep_going);

// Adds a parsed file (tests and the fuzz target build checkpoints from memory with this).
// Duplicate names across files become errors.
void AddCheckpointFile(Checkpoint& checkpoint, std::string path, SafetensorsHeader header);

}  // namespace mxdiff::checkpoint
