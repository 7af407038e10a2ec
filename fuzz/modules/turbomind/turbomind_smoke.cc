// mxdiff_turbomind_smoke LIBRARY [ordinary|folded]: the first check of libmxdiff_turbomind_kernel.so
// (ordinary, the default) or libmxdiff_turbomind_folded_kernel.so (folded) on a GPU, before any
// campaign. Loads it as fuzz_gemm does (dlopen, RTLD_NOW | RTLD_LOCAL), lists the MXF4 kernels TurboMind registered, then runs one small grouped problem on
// every kernel with splits 1 and 2 through the module's C ABI, on values whose every product and
// partial sum is exact in fp16 and fp32 (codes 0, +-0.5 .. +-2, scales 2^0 or 2^-1, activations
// +-1 or +-0.5, k 64: |sum| <= 128 in multiples of 1/8), so the expected output is the exact sum
// whatever the kernel's order: a wrong layout (nibble order, scale transpose, expert table, row
// offsets) or an unwritten element shows, and no rounding question can. Each run must also report
// the plan it ran (ABI version 2): the kernel asked for (MXDIFF_TURBOMIND_CTA_M), its chunk as
// cta_k, the split count clamped to k's chunks. Every 16th weight row has raw scale 112 in all its
// blocks, where the transforms differ (docs/numerics.md): ordinary flushes it to 0, folded gives
// e2m1 x 2^-15 (sums of those are exact in fp16 too), so the folded build shows that folded.patch
// is in effect. The other transform must be UNSUPPORTED. Exit status 0
// only when every run returned OK with the exact output and the other transform was refused; 1
// otherwise.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/modules/mxdiff_kernel_abi.h"
#include "reference/exit_status.h"


namespace {

// fp16 bits of a value exactly representable in fp16, as the test builds them.
uint16_t HalfBits(double value) {
  if (value == 0) return uint16_t{0};
  const uint16_t sign = value < 0 ? uint16_t{0x8000} : uint16_t{0};
  if (std::fabs(value) < std::ldexp(1.0, -14)) return uint16_t(sign | std::lround(std::ldexp(std::fabs(value), 24)));
  int exponent = 0;
  const double fraction = std::frexp(std::fabs(value), &exponent);  // value = fraction * 2^exponent
  const int biased = exponent - 1 + 15;
  const uint16_t mantissa = uint16_t(std::lround((fraction * 2 - 1) * 1024));
  return uint16_t(sign | (biased << 10) | mantissa);
}

constexpr double kE2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

}  // namespace

int main(int argc, char** argv) {
  const int transform = int(argc == 3 && std::strcmp(argv[2], "folded") == 0);  // the ABI's: 1 folded, else ordinary
  if (argc != 2 && !(argc == 3 && (transform == 1 || std::strcmp(argv[2], "ordinary") == 0))) {
    std::fprintf(stderr, "usage: %s path/to/libmxdiff_turbomind[_folded]_kernel.so [ordinary|folded]\n", argv[0]);
    return mxdiff::kExitBadInput;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "smoke: %s\n", dlerror());
    return mxdiff::kExitCheckFailed;
  }
  using ListFn = int (*)(char*, size_t);
  const auto list_kernels = reinterpret_cast<ListFn>(dlsym(library, "mxdiff_turbomind_list_kernels"));
  const auto entry = reinterpret_cast<mxdiff_kernel_entry_fn>(dlsym(library, MXDIFF_KERNEL_ENTRY_SYMBOL));
  if (list_kernels == nullptr || entry == nullptr) {
    std::fprintf(stderr, "smoke: %s lacks mxdiff_turbomind_list_kernels or %s\n", argv[1], MXDIFF_KERNEL_ENTRY_SYMBOL);
    return mxdiff::kExitCheckFailed;
  }
  std::vector<char> listing(1 << 16);
  const int count = list_kernels(listing.data(), listing.size());
  std::printf("registered MXF4 kernels: %d\n%s\n", count, listing.data());
  if (count <= 0) return mxdiff::kExitCheckFailed;

  const int groups = 3, n = 256, k = 64;
  const std::vector<int32_t> row_offsets = {0, 5, 5, 25};  // the middle expert owns no rows
  const int rows = row_offsets.back();
  std::vector<uint16_t> activations(size_t(rows) * k);
  std::vector<double> a(activations.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = (i * 7 % 5 < 2 ? 0.5 : 1.0) * (i * 13 % 3 == 0 ? -1 : 1);
    activations[i] = HalfBits(a[i]);
  }
  std::vector<uint8_t> codes(size_t(groups) * n * k / 2);
  std::vector<double> w(size_t(groups) * n * k);
  for (size_t i = 0; i < w.size(); ++i) {
    const int magnitude = int(i * 11 % 5);       // codes 0..4: 0, 0.5, 1, 1.5, 2
    const int sign = 8 * int(i * 29 % 7 < 3);
    const int code = sign | magnitude;
    codes[i / 2] |= uint8_t(i % 2 == 0 ? code : code << 4);  // low nibble = even k
    w[i] = (sign ? -1 : 1) * kE2m1[magnitude];
  }
  std::vector<uint8_t> scales(size_t(groups) * n * k / 32);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = uint8_t(127 - int(i * 5 % 3 == 0));  // 2^-1, 2^0
  constexpr int kFlushRow = 16, kFlushRaw = 112;  // ordinary flushes it to zero, folded gives 2^(112 - 127)
  for (size_t i = 0; i < scales.size(); ++i) {
    if (i / (k / 32) % n % kFlushRow == 5) scales[i] = kFlushRaw;
  }

  std::vector<uint16_t> expected(size_t(rows) * n);
  for (int g = 0; g < groups; ++g) {
    for (int r = row_offsets[g]; r < row_offsets[g + 1]; ++r) {
      for (int j = 0; j < n; ++j) {
        double sum = 0;
        for (int kk = 0; kk < k; ++kk) {
          const size_t wi = (size_t(g) * n + j) * k + kk;
          const int raw = scales[wi / 32];
          sum += a[size_t(r) * k + kk] * w[wi] * (transform == 0 && raw <= kFlushRaw ? 0.0 : std::ldexp(1.0, raw - 127));
        }
        expected[size_t(r) * n + j] = HalfBits(sum);
      }
    }
  }

  const mxdiff_kernel* kernel = entry();
  if (kernel == nullptr || kernel->abi_version != MXDIFF_KERNEL_ABI_VERSION) {
    std::fprintf(stderr, "smoke: %s: no kernel or another ABI version\n", argv[1]);
    return mxdiff::kExitCheckFailed;
  }
  int failures = 0;
  std::vector<uint16_t> output(expected.size());
  {  // each build serves one transform; the other is the other module's
    mxdiff_plan other_plan{};
    const mxdiff_problem other{groups, n, k, row_offsets.data(), activations.data(), codes.data(), scales.data(),
                               /*transform=*/1 - transform, /*cta_k=*/32, /*splits=*/1, /*step_model=*/1, &other_plan};
    char message[1024] = "";
    const int code = kernel->run(&other, output.data(), message, sizeof(message));
    failures += code != MXDIFF_KERNEL_UNSUPPORTED;
    std::printf("%s transform %d refused: code %d %s\n", code == MXDIFF_KERNEL_UNSUPPORTED ? "ok  " : "FAIL",
                1 - transform, code, message);
  }
  for (const char* line = listing.data(); *line != '\0';) {
    char name[512];
    int cta_m = 0, cta_n = 0, cta_k = 0, chunk = 0;
    if (std::sscanf(line, "%511s %d %d %d %d", name, &cta_m, &cta_n, &cta_k, &chunk) != 5) break;
    line = std::strchr(line, '\n');
    line = line ? line + 1 : "";
    setenv("MXDIFF_TURBOMIND_CTA_M", std::to_string(cta_m).c_str(), 1);
    for (int splits : {1, 2}) {
      mxdiff_plan ran_plan{};  // the plan the module reports (ABI version 2): this kernel, clamped as TurboMind does
      const mxdiff_problem problem{groups, n, k, row_offsets.data(), activations.data(), codes.data(), scales.data(),
                                   transform, /*cta_k=*/cta_k, splits, /*step_model=*/1, &ran_plan};
      std::fill(output.begin(), output.end(), uint16_t(0x7E01));  // a NaN no sum produces
      char message[1024] = "";
      const int code = kernel->run(&problem, output.data(), message, sizeof(message));
      size_t wrong = 0, first = 0;
      for (size_t i = 0; i < output.size(); ++i) {
        if (output[i] != expected[i] && wrong++ == 0) first = i;
      }
      const std::string label_start = "sm70_mxf4_" + std::to_string(cta_m) + "x";
      const bool plan_ok = ran_plan.cta_k == chunk && ran_plan.splits == std::min(splits, k / chunk) &&
                           std::strncmp(ran_plan.kernel, label_start.c_str(), label_start.size()) == 0;
      const bool ok = code == MXDIFF_KERNEL_OK && wrong == 0 && plan_ok;
      failures += !ok;
      std::printf("%s %s cta_k=%d splits=%d: code %d, ran cta_k=%d splits=%d kernel %s%s%s", ok ? "ok  " : "FAIL", name,
                  cta_k, splits, code, ran_plan.cta_k, ran_plan.splits, ran_plan.kernel, *message ? " " : "", message);
      if (code == MXDIFF_KERNEL_OK && wrong != 0) {
        std::printf(" %zu of %zu wrong, first [%zu][%zu] 0x%04x expected 0x%04x", wrong, output.size(), first / n,
                    first % n, output[first], expected[first]);
      }
      std::printf("\n");
    }
  }
  std::printf("%s\n", failures == 0 ? "smoke: all exact" : "smoke: FAILED");
  return failures == 0 ? mxdiff::kExitOk : mxdiff::kExitCheckFailed;
}
