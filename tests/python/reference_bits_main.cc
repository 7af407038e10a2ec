// mxdiff_reference_bits CASE...: for each case file, the C++ reference's fp16 output under the
// case's own settings (the transform fuzz_reference uses: folded only on a folded request), one
// line per case: "<path> <rows> <n> <hex bits, 4 digits each>". The Python package's test
// compares its reference_gemm with these lines (python/tests/test_oracle.py).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "fuzz/checks/reference_target.h"
#include "fuzz/formats/case_format.h"
#include "reference/reference_gemm.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    absl::StatusOr<mxdiff::fuzz::FuzzCase> c = mxdiff::fuzz::DecodeCase(bytes);
    if (!c.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[i], std::string(c.status().message()).c_str());
      return 2;
    }
    mxdiff::ReferenceOptions options;
    options.transform = mxdiff::fuzz::ReferenceTransform(*c);
    options.model = c->model;
    options.tactic = c->tactic;
    std::vector<uint16_t> out;
    if (absl::Status status = mxdiff::ReferenceGemm(c->Problem(), options, out); !status.ok()) {
      std::printf("%s error %s\n", argv[i], std::string(status.message()).c_str());
      continue;
    }
    std::printf("%s %d %d ", argv[i], c->rows(), c->n);
    for (uint16_t bits : out) std::printf("%04x", bits);
    std::printf("\n");
  }
  return 0;
}
