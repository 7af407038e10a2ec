// The one device-layer preparation (kernels/device_scales.h) on a GPU, skipped visibly without
// one: the ordinary scales always go up, the folded ones only for admitted experts, and a
// refused expert's folded range keeps what it held.
#include "kernels/device_scales.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "gtest/gtest.h"
#include "reference/prepare_layer_scales.h"
#include "reference/scale_class.h"
#include "tests/kernels/gpu_fixture.h"

namespace mxdiff::testing {
namespace {

class DeviceScalesTest : public GpuTest {
 protected:
  static std::vector<uint16_t> Read(const DeviceScales& scales, Transform transform, size_t count) {
    std::vector<uint16_t> host(count);
    EXPECT_EQ(cudaMemcpy(host.data(), scales.scales(transform), count * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  static std::vector<uint16_t> Prepared(Transform transform, std::span<const uint8_t> bytes) {
    std::vector<uint16_t> prepared(bytes.size());
    PrepareLayerScales(transform, bytes, prepared);
    return prepared;
  }
};

TEST_F(DeviceScalesTest, ARefusedLayerGetsNoFoldedBuffer) {
  std::vector<uint8_t> bytes(64, 127);
  bytes[9] = 3;
  const AdmittedScales admitted = AdmittedScales::Admit(bytes, 0);
  DeviceScales scales;
  ASSERT_TRUE(scales.Allocate(bytes.size(), admitted.layer()).ok());
  ASSERT_TRUE(scales.Write(admitted, 0, nullptr).ok());
  EXPECT_EQ(scales.scales(Transform::kFolded), nullptr);
  EXPECT_EQ(Read(scales, Transform::kOrdinary, bytes.size()), Prepared(Transform::kOrdinary, bytes));
}

TEST_F(DeviceScalesTest, OnlyAdmittedExpertsGetFoldedScales) {
  constexpr size_t kPer = 32;
  const RawRange range = ScaleClassRange(ScaleClass::kAdmitted);
  std::vector<uint8_t> bytes(3 * kPer);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(range.first + i % (range.last - range.first + 1));
  bytes[kPer + 5] = 140;  // expert 1 refused
  const AdmittedScales admitted = AdmittedScales::Admit(bytes, kPer);
  DeviceScales scales;
  ASSERT_TRUE(scales.Allocate(bytes.size() + kPer, AdmitLayer(std::vector<uint8_t>{127})).ok());
  ASSERT_NE(scales.scales(Transform::kFolded), nullptr);
  ASSERT_EQ(cudaMemset(const_cast<uint16_t*>(scales.scales(Transform::kFolded)), 0xAB, (bytes.size() + kPer) * 2),
            cudaSuccess);
  ASSERT_TRUE(scales.Write(admitted, kPer, nullptr).ok());  // at expert 1 of 4
  const std::vector<uint16_t> folded = Read(scales, Transform::kFolded, bytes.size() + kPer);
  const std::vector<uint16_t> want = Prepared(Transform::kFolded, bytes);
  for (size_t i = 0; i < bytes.size(); ++i) {
    const bool refused_expert = i / kPer == 1;
    EXPECT_EQ(folded[kPer + i], refused_expert ? 0xABAB : want[i]) << i;
  }
  EXPECT_EQ(folded[0], 0xABAB) << "written before the offset";
  const std::vector<uint16_t> ordinary = Read(scales, Transform::kOrdinary, bytes.size() + kPer);
  EXPECT_EQ(std::vector<uint16_t>(ordinary.begin() + kPer, ordinary.end()), Prepared(Transform::kOrdinary, bytes));
  EXPECT_FALSE(scales.Write(admitted, 2 * kPer, nullptr).ok()) << "beyond the buffer: refused, nothing written";
}

// WriteFromDevice prepares on the device what Write prepares on the host, for every raw byte,
// and grants the same buffers: none folded for a refused layer.
TEST_F(DeviceScalesTest, PreparingOnTheDeviceGivesTheHostsBits) {
  const RawRange admitted_range = ScaleClassRange(ScaleClass::kAdmitted);
  std::vector<uint8_t> every(4096), admitted(4096);
  for (size_t i = 0; i < every.size(); ++i) {
    every[i] = uint8_t(i * 7);
    admitted[i] = uint8_t(admitted_range.first + i % (admitted_range.last - admitted_range.first + 1));
  }
  for (const std::vector<uint8_t>& bytes : {every, admitted}) {
    const AdmittedScales verdict = AdmittedScales::Admit(bytes, 0);
    void* allocated = nullptr;
    ASSERT_EQ(cudaMalloc(&allocated, bytes.size()), cudaSuccess);
    uint8_t* raw = static_cast<uint8_t*>(allocated);
    ASSERT_EQ(cudaMemcpy(raw, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    DeviceScales on_host, on_device;
    ASSERT_TRUE(on_host.Allocate(bytes.size(), verdict.layer()).ok());
    ASSERT_TRUE(on_host.Write(verdict, 0, nullptr).ok());
    ASSERT_TRUE(on_device.Allocate(bytes.size(), verdict.layer()).ok());
    ASSERT_TRUE(on_device.WriteFromDevice(raw, bytes.size(), verdict.layer(), nullptr).ok());
    EXPECT_FALSE(on_device.WriteFromDevice(raw, bytes.size() + 1, verdict.layer(), nullptr).ok()) << "beyond the buffer";
    cudaFree(raw);
    for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
      ASSERT_EQ(on_device.scales(transform) == nullptr, on_host.scales(transform) == nullptr) << int(transform);
      if (on_host.scales(transform) == nullptr) continue;
      EXPECT_EQ(Read(on_device, transform, bytes.size()), Read(on_host, transform, bytes.size())) << int(transform);
    }
    EXPECT_EQ(on_device.scales(Transform::kFolded) != nullptr, verdict.layer().admitted);
  }
}

TEST_F(DeviceScalesTest, FillPreparesOneKnownByteAndAdmitsNothing) {
  const std::vector<uint8_t> bytes(40, 127);
  const LayerAdmission admitted;  // raw 127 is 2^0, admitted
  ASSERT_TRUE(AdmitLayer(bytes).admitted);
  DeviceScales scales;
  ASSERT_TRUE(scales.Allocate(bytes.size(), admitted).ok());
  const uint64_t before = AdmittedByteCount();
  ASSERT_TRUE(scales.Fill(127, admitted, bytes.size(), nullptr).ok());
  EXPECT_EQ(AdmittedByteCount(), before);
  for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
    EXPECT_EQ(Read(scales, transform, bytes.size()), Prepared(transform, bytes)) << int(transform);
  }
  EXPECT_FALSE(scales.Fill(127, admitted, bytes.size() + 1, nullptr).ok()) << "beyond the buffer";
}

}  // namespace
}  // namespace mxdiff::testing
