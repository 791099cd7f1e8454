#include "worker/backend/factory/backend_factory.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/model/testing/tiny_model.h"

namespace pagellm {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const ModelCheckpoint> Tiny() {
  auto ckpt = testing::TinyCheckpoint(GgmlType::kQ8_0, testing::TinyLlamaConfig(/*layers=*/1));
  EXPECT_NE(ckpt, nullptr);
  return ckpt;
}

TEST(BackendFactoryTest, BuildsEachBackendByName) {
  BackendOptions o;
  o.cpu.threads = 1;
  o.cpu.num_kv_blocks = 8;
  absl::StatusOr<std::unique_ptr<Backend>> cpu = CreateBackend(o, Tiny());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*cpu)->name(), "cpu");
  EXPECT_EQ((*cpu)->num_kv_blocks(), 8);

  o.device = "mock";
  absl::StatusOr<std::unique_ptr<Backend>> mock = CreateBackend(o, nullptr);
  ASSERT_TRUE(mock.ok()) << mock.status();
  EXPECT_EQ((*mock)->name(), "mock");
}

TEST(BackendFactoryTest, RefusesWhatItCannotBuild) {
  BackendOptions o;
  EXPECT_EQ(CreateBackend(o, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  o.device = "tpu";
  EXPECT_THAT(std::string(CreateBackend(o, Tiny()).status().message()),
              HasSubstr("unknown device"));
  // Weights only a GPU generates cannot run on the CPU.
  o.device = "cpu";
  auto generated = MakeGeneratedCheckpoint(testing::TinyLlamaConfig(), GgmlType::kBF16, 1);
  ASSERT_TRUE(generated.ok());
  EXPECT_EQ(CreateBackend(o, std::shared_ptr<const ModelCheckpoint>(*std::move(generated)))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Tiny()'s head_dim of 8 is not one the CUDA kernels support: refused with or without a GPU.
  o.device = "cuda";
  EXPECT_FALSE(CreateBackend(o, Tiny()).ok());
}

}  // namespace
}  // namespace pagellm
