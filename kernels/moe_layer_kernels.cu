// The MoE layer's kernels besides the GEMMs (moe_layer_kernels.h). Built with -fmad=false: the
// SwiGLU and the weighted sum are the shared headers' explicit IEEE operations and nothing may
// be contracted around them (kernels/CMakeLists.txt).
#include "kernels/moe_layer_kernels.h"

#include "kernels/dependent_launch.cuh"
#include "kernels/moe_layer.h"
#include "kernels/tile_map.h"
#include "reference/moe_layer_combine.h"
#include "reference/swiglu.h"

namespace mxdiff {
namespace {

constexpr int kThreads = 256;

// Inclusive scans of three ints per thread over the CTA at once (blockDim.x a multiple of 32):
// within each warp by shuffles, then over the warps' totals; two barriers in all.
__device__ void ScanThree(int& a, int& b, int& c) {
  __shared__ int totals[3][32];
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int na = __shfl_up_sync(0xFFFFFFFFu, a, offset);
    const int nb = __shfl_up_sync(0xFFFFFFFFu, b, offset);
    const int nc = __shfl_up_sync(0xFFFFFFFFu, c, offset);
    if (lane >= offset) a += na, b += nb, c += nc;
  }
  if (lane == 31) totals[0][warp] = a, totals[1][warp] = b, totals[2][warp] = c;
  __syncthreads();
  if (warp == 0) {
    const int warps = int(blockDim.x) >> 5;
    for (int i = 0; i < 3; ++i) {
      int total = lane < warps ? totals[i][lane] : 0;
      for (int offset = 1; offset < 32; offset <<= 1) {
        const int n = __shfl_up_sync(0xFFFFFFFFu, total, offset);
        if (lane >= offset) total += n;
      }
      totals[i][lane] = total;
    }
  }
  __syncthreads();
  if (warp > 0) a += totals[0][warp - 1], b += totals[1][warp - 1], c += totals[2][warp - 1];
}

// The routing kernel's dynamic shared memory.
struct RouteShared {
  int32_t* ids;        // max_entries: every expert id slot
  int32_t* rank;       // max_entries: an entry's rank among the entries of its expert
  int32_t* ends;       // threads: rows, then inclusive prefix: end row of each group
  int32_t* tiles13;    // threads: M tiles, then their inclusive prefix
  int32_t* tiles2;     // threads
  int32_t* row_token;  // the token of each row
};
__device__ __forceinline__ RouteShared CarveRouteShared(int32_t* smem, int max_entries, int threads) {
  RouteShared s;
  s.ids = smem;
  s.rank = s.ids + max_entries;
  s.ends = s.rank + max_entries;
  s.tiles13 = s.ends + threads;
  s.tiles2 = s.tiles13 + threads;
  s.row_token = s.tiles2 + threads;
  return s;
}

// A refused routing's verdict and its three details (MoeDeviceHeader).
struct RouteVerdict {
  int verdict = int(MoeRoutingVerdict::kOk);
  int detail[3] = {0, 0, 0};
};

// Each valid entry's rank (the number of earlier entries naming its expert); the first entry
// naming no expert lowers first_bad.
__device__ __forceinline__ void RankEntries(const MoeRouteArgs& a, const RouteShared& s, int entries, int& first_bad) {
  for (int i = int(threadIdx.x); i < entries; i += int(blockDim.x)) {
    const int id = s.ids[i];
    if (id < 0 || id >= a.experts) {
      atomicMin(&first_bad, i);
      continue;
    }
    int earlier = 0;
    for (int j = 0; j < i; ++j) earlier += s.ids[j] == id ? 1 : 0;
    s.rank[i] = earlier;
  }
}

// Thread t's group (t < groups): its rows and M tiles of each GEMM, as inclusive prefixes over
// the groups in ends, tiles13 and tiles2. Its barriers also order RankEntries' atomicMin before
// any read of first_bad after it.
__device__ __forceinline__ void PrefixGroupRows(const MoeRouteArgs& a, const RouteShared& s, int tokens, int entries,
                                                bool valid) {
  const int t = int(threadIdx.x);
  int rows = 0;
  if (t < a.groups) {
    if (a.shared_expert && t == a.experts) {
      rows = tokens > 0 && valid ? tokens : 0;
    } else {
      for (int j = 0; j < entries; ++j) rows += s.ids[j] == t ? 1 : 0;
    }
  }
  int tile13 = GroupMTiles(rows, a.cta_m[0]);
  int tile2 = GroupMTiles(rows, a.cta_m[1]);
  ScanThree(rows, tile13, tile2);
  s.ends[t] = rows;
  s.tiles13[t] = tile13;
  s.tiles2[t] = tile2;
  __syncthreads();
}

// Refused: no rows, every tile empty, nothing gathered; CTA 0 writes the verdict.
__device__ __forceinline__ void WriteRefusal(const MoeRouteArgs& a, const RouteVerdict& v) {
  if (blockIdx.x != 0) return;
  const int t = int(threadIdx.x), threads = int(blockDim.x);
  for (int g = t; g <= a.groups; g += threads) a.row_offsets[g] = 0;
  for (int m = 0; m < 2; ++m) {
    for (int i = t; i < a.capacity[m]; i += threads) {
      reinterpret_cast<int4*>(a.tile_map[m])[i] = make_int4(-1, 0, 0, 0);
    }
  }
  if (t == 0) *a.header = MoeDeviceHeader{v.verdict, 0, 0, {v.detail[0], v.detail[1], v.detail[2], 0, 0}};
}

// Rows of the schedule: entry i goes to begin(group) + rank; the shared group's row t is token t.
__device__ __forceinline__ void PlaceRows(const MoeRouteArgs& a, const RouteShared& s, int tokens, int entries) {
  const int t = int(threadIdx.x), threads = int(blockDim.x);
  for (int i = t; i < entries; i += threads) {
    const int g = s.ids[i];
    const int row = (g == 0 ? 0 : s.ends[g - 1]) + s.rank[i];
    s.row_token[row] = i / a.top_k;
    if (blockIdx.x == 0) a.entry_row[i] = row;
  }
  if (a.shared_expert) {
    const int begin = a.experts == 0 ? 0 : s.ends[a.experts - 1];
    for (int i = t; i < tokens; i += threads) s.row_token[begin + i] = i;
  }
  __syncthreads();
}

// CTA 0's output: the row offsets, each row's token, the tile maps in FindGroupTile's
// enumeration (the rest of each grid's tiles empty) and the header.
__device__ __forceinline__ void WriteSchedule(const MoeRouteArgs& a, const RouteShared& s, int tokens, int total_rows,
                                              const int needed[2]) {
  const int t = int(threadIdx.x), threads = int(blockDim.x);
  if (t <= a.groups) a.row_offsets[t] = t == 0 ? 0 : s.ends[t - 1];
  for (int r = t; r < total_rows; r += threads) a.row_token[r] = s.row_token[r];
  for (int m = 0; m < 2; ++m) {
    const int32_t* prefix = m == 0 ? s.tiles13 : s.tiles2;
    int4* map = reinterpret_cast<int4*>(a.tile_map[m]);
    if (t < a.groups) {
      const int first_tile = t == 0 ? 0 : prefix[t - 1];
      const int begin = t == 0 ? 0 : s.ends[t - 1];
      for (int i = 0; first_tile + i < prefix[t]; ++i) {
        map[first_tile + i] = make_int4(t, begin + i * a.cta_m[m], s.ends[t], 0);
      }
    }
    for (int i = needed[m] + t; i < a.capacity[m]; i += threads) map[i] = make_int4(-1, 0, 0, 0);
  }
  if (t == 0) *a.header = MoeDeviceHeader{0, tokens, total_rows, {0, 0, 0, 0, 0}};
}

// Gather: this CTA's row, 16 bytes at a time (hidden is a multiple of 32).
__device__ __forceinline__ void GatherRow(const MoeRouteArgs& a, const RouteShared& s, int total_rows) {
  const int row = int(blockIdx.x);
  if (a.gathered == nullptr || row >= total_rows) return;
  const uint4* source = reinterpret_cast<const uint4*>(a.activations + size_t(s.row_token[row]) * a.hidden);
  uint4* destination = reinterpret_cast<uint4*>(a.gathered + size_t(row) * a.hidden);
  for (int i = int(threadIdx.x); i < a.hidden / 8; i += int(blockDim.x)) destination[i] = __ldg(source + i);
}

// The schedule of reference/moe_layer.cc's ScheduleMoeRouting, computed by one CTA in shared
// memory: a routed group's rows follow its entries in ascending (token, slot) order (an entry's
// rank among the entries of its expert is the number of earlier entries naming it), the shared
// group holds one row per token.
__global__ void MoeRouteKernel(MoeRouteArgs a) {
  extern __shared__ int32_t smem[];
  const int max_entries = a.max_tokens * a.top_k;
  const int threads = int(blockDim.x);
  const RouteShared s = CarveRouteShared(smem, max_entries, threads);
  __shared__ int first_bad;

  const int t = threadIdx.x;
  const WaitForPrecedingKernelAtExit wait_at_exit{a.after_w13};
  if (!a.after_w13) WaitForPrecedingKernel();
  LetDependentsStart();  // the next kernel's CTAs may take their places; they wait for this kernel's end
  // Every expert id slot is read at once with the token count (they are all in bounds): one
  // global round trip instead of two.
  for (int i = t; i < max_entries; i += threads) s.ids[i] = __ldg(a.expert_ids + i);
  const int tokens = __ldg(a.tokens);
  RouteVerdict v;
  if (tokens < 0 || tokens > a.max_tokens) {
    v.verdict = int(MoeRoutingVerdict::kTooManyTokens);
    v.detail[0] = tokens;
  }
  const int entries = v.verdict == 0 ? tokens * a.top_k : 0;
  if (t == 0) first_bad = entries;
  __syncthreads();
  RankEntries(a, s, entries, first_bad);
  PrefixGroupRows(a, s, tokens, entries, v.verdict == 0);
  if (v.verdict == 0 && first_bad < entries) {
    v.verdict = int(MoeRoutingVerdict::kInvalidExpert);
    v.detail[0] = first_bad / a.top_k;
    v.detail[1] = first_bad % a.top_k;
    v.detail[2] = s.ids[first_bad];
  }
  const int total_rows = s.ends[a.groups - 1];
  const int needed[2] = {s.tiles13[a.groups - 1], s.tiles2[a.groups - 1]};
  if (v.verdict == 0 && (needed[0] > a.capacity[0] || needed[1] > a.capacity[1])) {
    v.verdict = int(MoeRoutingVerdict::kOverCapacity);
    v.detail[0] = needed[0];
    v.detail[1] = needed[1];
    v.detail[2] = total_rows;
  }
  if (v.verdict != 0) return WriteRefusal(a, v);
  PlaceRows(a, s, tokens, entries);
  if (blockIdx.x == 0) WriteSchedule(a, s, tokens, total_rows, needed);
  GatherRow(a, s, total_rows);
}

// Two adjacent columns per thread: gate j, j + 1 and up I + j, I + j + 1 of one row. The row
// count and the operands load together (every row of the buffer is in bounds): one round trip.
__global__ void __launch_bounds__(kThreads) MoeSwigluKernel(MoeSwigluArgs a) {
  const int pairs = a.intermediate / 2;
  const long long index = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const int row = int(index / pairs);
  const int pair = int(index % pairs);
  if (row >= a.max_rows) return;
  WaitForPrecedingKernel();
  LetDependentsStart();
  const uint16_t* row_in = a.w13 + size_t(row) * 2 * a.intermediate;
  const int rows = __ldg(&a.header->rows);
  const uint32_t gate = __ldg(reinterpret_cast<const uint32_t*>(row_in) + pair);
  const uint32_t up = __ldg(reinterpret_cast<const uint32_t*>(row_in + a.intermediate) + pair);
  if (row >= rows) return;
  const uint32_t low = swiglu_f16(uint16_t(gate), uint16_t(up), a.limit);
  const uint32_t high = swiglu_f16(uint16_t(gate >> 16), uint16_t(up >> 16), a.limit);
  reinterpret_cast<uint32_t*>(a.activated + size_t(row) * a.intermediate)[pair] = low | (high << 16);
}

// One hidden column of one token per thread, slots in order, then the shared expert (one column
// rather than two: twice the threads, half the serial work each, about 0.4 us less in the chain
// at one decode token on the H200, kernels/README.md).
// What the routing kernel and SetInputs wrote (the token count, the slots' rows and weights)
// loads before the wait for W2: this kernel starts only after every W2 CTA has passed its own
// wait, so the routing kernel has finished long before; the loads go through L2 (ld.global.cg),
// where its writes are visible. After the wait only the W2 values of each batch of
// kCombineSlots slots load, all at once (top_k 6 is one batch: one round trip after W2).
constexpr int kCombineSlots = 8;

__global__ void __launch_bounds__(kThreads) MoeCombineKernel(MoeCombineArgs a) {
  const long long index = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const int token = int(index / a.hidden);
  const int column = int(index % a.hidden);
  if (token >= a.max_tokens) return;
  const int32_t* entry_row = a.entry_row + size_t(token) * a.top_k;
  const float* weights = a.weights + size_t(token) * a.top_k;
  int row[kCombineSlots];
  float weight[kCombineSlots];
  auto load_slots = [&](int first) {
#pragma unroll
    for (int s = 0; s < kCombineSlots; ++s) {
      if (first + s < a.top_k) {
        row[s] = __ldcg(entry_row + first + s);
        weight[s] = __ldcg(weights + first + s);
      }
    }
  };
  const int tokens = __ldcg(&a.header->tokens);
  const int shared_row = a.shared_expert ? __ldcg(a.row_offsets + a.experts) + token : 0;
  load_slots(0);
  WaitForPrecedingKernel();
  if (token >= tokens) return;
  const uint16_t* w2 = a.w2 + column;
  const size_t hidden = size_t(a.hidden);
  float sum = 0.0f;
  for (int first = 0; first < a.top_k; first += kCombineSlots) {
    if (first > 0) load_slots(first);
    uint16_t y[kCombineSlots];
#pragma unroll
    for (int s = 0; s < kCombineSlots; ++s) {
      if (first + s < a.top_k) y[s] = __ldg(w2 + size_t(row[s]) * hidden);
    }
#pragma unroll
    for (int s = 0; s < kCombineSlots; ++s) {
      if (first + s < a.top_k) sum = moe_combine_slot(sum, weight[s], y[s]);
    }
  }
  if (a.shared_expert) sum = moe_combine_shared(sum, __ldg(w2 + size_t(shared_row) * hidden));
  a.output[size_t(token) * hidden + column] = f32_to_f16_rne(sum);
}

unsigned Blocks(long long threads) { return unsigned((threads + kThreads - 1) / kThreads); }

}  // namespace

int MoeRouteThreads(int groups) {
  const int threads = (groups + 1 + 31) / 32 * 32;  // one thread per group and one per row offset
  return threads < 128 ? 128 : threads;
}

size_t MoeRouteSharedBytes(int groups, int max_tokens, int top_k, int max_rows) {
  return sizeof(int32_t) * (2 * size_t(max_tokens) * size_t(top_k) + 3 * size_t(MoeRouteThreads(groups)) +
                            size_t(max_rows));
}

cudaError_t ConfigureMoeRoute(size_t shared_bytes) {
  if (shared_bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(MoeRouteKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes));
}

cudaError_t LaunchMoeRoute(const MoeRouteArgs& args, cudaStream_t stream, bool dependent) {
  const size_t shared = MoeRouteSharedBytes(args.groups, args.max_tokens, args.top_k, args.max_rows);
  const int ctas = args.gathered != nullptr && args.max_rows > 0 ? args.max_rows : 1;
  return LaunchKernel(MoeRouteKernel, dim3(unsigned(ctas)),
                      dim3(MoeRouteThreads(args.groups)), shared, stream, dependent, args);
}

cudaError_t LaunchMoeSwiglu(const MoeSwigluArgs& args, cudaStream_t stream, bool dependent) {
  return LaunchKernel(MoeSwigluKernel, dim3(Blocks((long long)args.max_rows * (args.intermediate / 2))),
                      dim3(kThreads), 0, stream, dependent, args);
}

cudaError_t LaunchMoeCombine(const MoeCombineArgs& args, cudaStream_t stream, bool dependent) {
  return LaunchKernel(MoeCombineKernel, dim3(Blocks((long long)args.max_tokens * args.hidden)), dim3(kThreads), 0,
                      stream, dependent, args);
}

}  // namespace mxdiff
