// One GemmRunner for a GPU test suite, or a visible skip where no device exists.
#pragma once

#include <memory>

#include "gtest/gtest.h"
#include "kernels/gemm_runner.h"
#include "tests/kernels/random_layer.h"

namespace mxdiff::testing {

class GpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<GemmRunner>> runner = GemmRunner::Create();
    if (runner.ok()) {
      runner_ = std::move(*runner).release();
    } else {
      create_status_ = new absl::Status(runner.status());
    }
  }
  static void TearDownTestSuite() {
    delete runner_;
    runner_ = nullptr;
    delete create_status_;
    create_status_ = nullptr;
  }
  void SetUp() override {
    if (runner_ == nullptr) GTEST_SKIP() << "no CUDA device: " << create_status_->ToString();
  }
  GemmRunner& runner() { return *runner_; }
  absl::StatusOr<std::unique_ptr<PreparedLayer>> Prepare(const RandomLayer& layer) {
    return runner().Prepare(layer.groups, layer.n, layer.k, layer.codes, layer.scales);
  }

 private:
  static inline GemmRunner* runner_ = nullptr;
  static inline absl::Status* create_status_ = nullptr;
};

}  // namespace mxdiff::testing
