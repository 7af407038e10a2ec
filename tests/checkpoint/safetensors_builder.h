// Test helper: safetensors bytes made by hand, well-formed (from a tensor list) or broken on
// purpose (from raw header text), and files holding them in a fresh temporary folder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace mxdiff::checkpoint::testing {

struct TestTensor {
  TestTensor(std::string name_, std::string dtype_, std::vector<uint64_t> shape_, uint8_t fill_ = 120)
      : name(std::move(name_)), dtype(std::move(dtype_)), shape(std::move(shape_)), fill(fill_) {}
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> data;  // filled with `fill` to the shape's size when empty
  uint8_t fill = 120;
};

inline size_t DtypeBytes(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  return 1;
}

// The 8-byte little-endian length, then the header text, then the data.
inline std::vector<uint8_t> RawFile(const std::string& header, const std::vector<uint8_t>& data = {}) {
  std::vector<uint8_t> bytes(8 + header.size() + data.size());
  const uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = uint8_t(length >> (8 * i));
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  std::copy(data.begin(), data.end(), bytes.begin() + 8 + std::ptrdiff_t(header.size()));
  return bytes;
}

// A valid file: tensors laid out in the given order.
inline std::vector<uint8_t> BuildFile(std::vector<TestTensor> tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<uint8_t> data;
  for (TestTensor& tensor : tensors) {
    uint64_t elements = 1;
    for (uint64_t d : tensor.shape) elements *= d;
    if (tensor.data.empty()) tensor.data.assign(size_t(elements * DtypeBytes(tensor.dtype)), tensor.fill);
    header[tensor.name] = {{"dtype", tensor.dtype},
                           {"shape", tensor.shape},
                           {"data_offsets", {data.size(), data.size() + tensor.data.size()}}};
    data.insert(data.end(), tensor.data.begin(), tensor.data.end());
  }
  return RawFile(header.dump(), data);
}

class TempDir {
 public:
  TempDir() {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            (std::string("mxdiff_audit_") + test->test_suite_name() + "_" + test->name() + "_" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    const std::filesystem::path file = path_ / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return file.string();
  }
  std::string Write(const std::string& name, const std::string& text) const {
    return Write(name, std::vector<uint8_t>(text.begin(), text.end()));
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace mxdiff::checkpoint::testing
