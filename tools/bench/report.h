// The results of `mxdiff bench` as plain data, and their three renderings: the terminal table,
// JSON (everything, samples included) and the raw samples as CSV (tools/bench/plot_bench.py
// draws the PNG from the CSV and the JSON). CUDA-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/bench/bench_spec.h"
#include "tools/bench/experiment.h"
#include "tools/bench/verdict.h"

namespace mxdiff::bench {

enum class Protocol : uint8_t {
  kSound = 0,    // pinned tactic, independent warm-up and capture, A B B A
  kSwapped = 1,  // the same, B captured first, B A A B
  kSameArm = 2,  // A against a second, independently captured A, A B B A
  kNaive = 3,    // the seed's protocol (bench_driver.h)
};
std::string_view ProtocolName(Protocol protocol);  // "sound", "swapped", "a-a", "naive"

struct ArmRun {
  std::string label;  // "ordinary", "folded@8x128x64/s2/w0", "ext:..."
  std::string route;  // what ran: "folded 8x128x64/s16/w0 (folded-admitted)"
};

struct ExperimentReport {
  Protocol protocol = Protocol::kSound;
  Pattern pattern = Pattern::kAbba;
  ArmRun a;
  ArmRun b;
  std::string method;  // one line: warm-up, capture order, weight sets, flush
  bool bits_checked = false;
  bool bits_equal = false;
  std::string bits_detail;
  std::string error;  // not empty: the experiment did not run to the end
  uint64_t seed = 0;  // of its bootstrap
  ExperimentResult result;

  bool has_analysis() const { return error.empty() && result.analysis_status.ok() && result.rounds_run > 0; }
};

struct ShapeReport {
  ShapeSpec shape;
  int groups = 0;
  int rows_per_group = 0;
  std::string tactic;         // the pinned tactic
  std::string tactic_source;  // "dispatch table", "tuned", "--tactic"
  int sets = 0;
  size_t set_bytes = 0;
  int calls_per_replay = 0;
  size_t l2_flush_bytes = 0;  // 0: no flush
  std::string clocks;         // NVML at the start of the shape: "SM 1980 MHz, memory 3201 MHz, 35 C, 90 W"
  std::vector<ExperimentReport> experiments;
  FinalVerdict verdict;
  std::string error;  // not empty: the shape could not be set up
};

struct BenchReport {
  std::string command;
  std::string device;
  std::string nvml;         // "NVML: <device name> (reasons via ...)" or why it is unavailable
  std::string timing;       // "CUDA graph replays, device events" or "host calls, steady clock"
  uint64_t seed = 0;
  StoppingRule stopping;
  int resamples = 0;
  double confidence = 0;
  std::vector<ShapeReport> shapes;
};

// The shape's verdict from its experiments (verdict.h's rule): a bit difference in any but the
// naive one, then the sound, swapped and A/A differences. Used by the GEMM and the layer bench.
FinalVerdict ShapeVerdict(const std::vector<ExperimentReport>& experiments, double min_effect_us,
                          std::string_view a_label, std::string_view b_label);

// shape,protocol,schedule,round,slot,arm,arm_label,per_call_us,replay_us,calls,sm_mhz,memory_mhz,
// reasons,discarded: one row per timed replay, discarded ones included.
std::string SamplesCsv(const BenchReport& report);
std::string ReportJson(const BenchReport& report);
std::string ReportTable(const BenchReport& report);

}  // namespace mxdiff::bench
