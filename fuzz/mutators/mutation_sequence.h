// Named mutations and the record of which ones produced an input (libFuzzer's model:
// MutationDispatcher names every mutator and PrintMutationSequence prints the sequence that led to
// a crash). Each structured mutator (fuzz/mutators/case_mutator.cc, fuzz/mutators/layer_mutator.cc) draws from a
// table of (name, function); every mutation it applies is recorded here, per process, and the
// record of the last mutated input goes into a finding's sidecar (fuzz/driver/findings.cc: `mutations:`)
// when the finding's input is exactly what that mutation produced.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mxdiff::fuzz {

// One mutation: its name (as recorded) and its function over a case of type Case.
template <typename Case, typename Rng, typename Profile>
struct NamedMutation {
  std::string_view name;
  void (*apply)(Case& c, Rng& rng, const Profile& profile);
};

// The names of a table of mutations, each once (a name in adjacent slots is drawn more often).
template <typename Mutation, size_t N>
std::vector<std::string_view> MutationNamesOf(const Mutation (&table)[N]) {
  std::vector<std::string_view> names;
  for (const Mutation& mutation : table) {
    if (names.empty() || names.back() != mutation.name) names.push_back(mutation.name);
  }
  return names;
}

// Applies `mutation` and records its name.
template <typename Case, typename Rng, typename Profile>
void ApplyMutation(const NamedMutation<Case, Rng, Profile>& mutation, Case& c, Rng& rng, const Profile& profile);

// A call of a custom mutator starts on `input`; the names that follow are its steps. Where
// `input` is what the previous call produced (libFuzzer mutates a unit several times in a row,
// running each result), the sequence goes on from there, so it runs from the corpus unit.
void StartMutationSequence(std::span<const uint8_t> input);
// The steps since StartMutationSequence dropped (a mutator's attempt that was thrown away).
void RestartMutationSequence();
void RecordMutation(std::string_view name);
// The sequence produced `output` (the bytes the mutator returns).
void FinishMutationSequence(std::span<const uint8_t> output);
// The last sequence's names joined by '-' (libFuzzer's form) when `input` is exactly its output;
// empty for any other input (a corpus file, a seed, a replay).
std::string MutationSequenceOf(std::span<const uint8_t> input);

template <typename Case, typename Rng, typename Profile>
void ApplyMutation(const NamedMutation<Case, Rng, Profile>& mutation, Case& c, Rng& rng, const Profile& profile) {
  RecordMutation(mutation.name);
  mutation.apply(c, rng, profile);
}

}  // namespace mxdiff::fuzz
