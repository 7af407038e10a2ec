#include "fuzz/mutators/mutation_sequence.h"

#include <algorithm>
#include <vector>

namespace mxdiff::fuzz {
namespace {

struct Record {
  std::string before;           // the names that produced this call's input
  std::string names;            // the sequence so far
  std::vector<uint8_t> output;  // what it produced; empty until finished
  bool finished = false;
};

Record& ThisProcess() {
  static thread_local Record record;
  return record;
}

}  // namespace

void StartMutationSequence(std::span<const uint8_t> input) {
  Record& record = ThisProcess();
  const bool chained = record.finished && record.output.size() == input.size() &&
                       std::equal(input.begin(), input.end(), record.output.begin());
  record.before = chained ? record.names : std::string();
  record.names = record.before;
  record.output.clear();
  record.finished = false;
}

void RestartMutationSequence() {
  Record& record = ThisProcess();
  record.names = record.before;
}

void RecordMutation(std::string_view name) {
  std::string& names = ThisProcess().names;
  if (!names.empty()) names += '-';
  names += name;
}

void FinishMutationSequence(std::span<const uint8_t> output) {
  Record& record = ThisProcess();
  record.output.assign(output.begin(), output.end());
  record.finished = true;
}

std::string MutationSequenceOf(std::span<const uint8_t> input) {
  const Record& record = ThisProcess();
  const bool same = record.finished && record.output.size() == input.size() &&
                    std::equal(input.begin(), input.end(), record.output.begin());
  return same ? record.names : std::string();
}

}  // namespace mxdiff::fuzz
