// The whole MoE decode layer (kernels/moe_layer.h) timed per arm the way `mxdiff bench` times
// one GEMM: the unit the seed measured (us per layer). Needs CUDA (MXDIFF_HAVE_CUDA); the header
// is CUDA-free.
//
// Each arm is its own MoeLayer (own buffers, the same weights written into it), captured with
// its request (ordinary or folded, both GEMMs' tactics pinned and fail-closed in the sound
// protocols) and then captured again by the bench into its own CUDA graph of the whole layer
// (route, W13, SwiGLU, W2, combine: EnqueueStages(kMoeStageAll)). One replay is one layer call,
// timed by two device events; before it, outside the events, the arm's next routing of a
// rotation (new activations, expert ids and routing weights each) is written into the captured
// buffers and L2 is flushed (the layer's weights, about 0.9 GB at PP2xTP4, are far beyond L2
// anyway). Both arms replay the same routings in the same order.
//
// Protocols, statistics and verdict are bench_driver.h's: sound A B B A, swapped B A A B, A/A,
// and with `naive` the seed's protocol (naive_protocol.h's order of steps): A captured at its
// first use on a fresh runner, one routing, no flush, no warm-up; the tactics B inherits come
// from tuning each GEMM's decode dispatch shape (GemmRunner::Tune on generated weights of that
// shape) on B's runner (--first_use=table) or on the one tune-on-first-use runner both arms share
// (--first_use=tune, where A's capture, a first use inside a capture, gets the fallback: the layer
// asks its runner for tactics without launching through it, so the bench applies
// DecideFirstUse itself). The bit check compares the layer outputs (tokens x hidden) of every
// routing before timing, and the last outputs after.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/moe_layer.h"
#include "tools/bench/bench_driver.h"
#include "tools/bench/report.h"

namespace mxdiff::bench {

struct LayerBenchSpec {
  std::string name = "MoE layer PP2xTP4";
  // DeepSeek V4 at PP2 x TP4: hidden 4096, 2048 / 4 intermediate per rank, 256 routed + 1 shared.
  MoeShape shape{.hidden = 4096, .intermediate = 512, .experts = 256, .top_k = 6, .shared_expert = true};
  int tokens = 1;     // decode tokens per layer call (the graph's max_tokens)
  int routings = 64;  // the rotation: a new routing for every replay
  // Writes the weights of both GEMMs, every expert, into one arm's layer (called once for every
  // layer the bench creates, so it must write the same weights each time). Empty: generated
  // weights from the config's seed (random codes, scale bytes in the admitted range, so both
  // transforms are exact and must agree bit for bit).
  std::function<absl::Status(MoeLayer&)> write_weights;
  // The sound protocols' policy for both arms: fail-closed (a folded arm that would fall back is
  // an error). Real weights (the gate) may hold a GEMM refused on this rank, where the candidate
  // runs ordinary as it would when deployed: kFallback there; the routes in the report say what ran.
  FallbackPolicy policy = FallbackPolicy::kFailClosed;
};

// The spec of a `--shapes=layer-*` shape (ShapeSpec::layer), with generated weights.
LayerBenchSpec LayerSpecFor(const ShapeSpec& shape, int tokens);

// Runs the sound, swapped and A/A measurements (and the naive one with config.naive) of
// config.a against config.b (builtin arms only) on `spec`, with config's stopping rule, seeds,
// --tactic / --tune, --first_use, L2 flush, warm-up and device; config.shapes, groups,
// rows_per_group, sets_bytes and calls are not used. The result is the per-shape report
// `mxdiff bench` prints (per_call_us = us per layer call). Unavailable without a GPU; a
// measurement that fails is in the report.
absl::StatusOr<ShapeReport> RunLayerBench(const LayerBenchSpec& spec, const BenchConfig& config);

}  // namespace mxdiff::bench
