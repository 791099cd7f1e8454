#include "router/http/adapters_on_demand.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

// Changes the test answers by hand.
struct Changes {
  std::vector<LoraChangeRequest> seen;
  std::vector<AdaptersOnDemand::Done> pending;
  AdaptersOnDemand::Change change() {
    return [this](const LoraChangeRequest& c, AdaptersOnDemand::Done done) {
      seen.push_back(c);
      pending.push_back(std::move(done));
    };
  }
};

TEST(AdaptersOnDemandTest, LoadsTheDirectoryOfTheNameOnceForAllWhoAskMeanwhile) {
  Changes changes;
  AdaptersOnDemand loader(changes.change());
  std::vector<absl::Status> got;
  for (int i = 0; i < 3; ++i) loader.Load("org/sql", [&](absl::Status st) { got.push_back(st); });
  ASSERT_EQ(changes.seen.size(), 1u);
  EXPECT_TRUE(changes.seen[0].load);
  EXPECT_EQ(changes.seen[0].lora_name, "org/sql");
  EXPECT_EQ(changes.seen[0].lora_path, "org/sql");  // inside each worker's --lora-dir
  EXPECT_TRUE(got.empty());
  changes.pending[0](absl::OkStatus());
  EXPECT_EQ(got.size(), 3u);
  for (const absl::Status& st : got) EXPECT_TRUE(st.ok()) << st;
  // Over: the next request for it loads again (the workers answer AlreadyExists: OK).
  loader.Load("org/sql", [&](absl::Status st) { got.push_back(st); });
  ASSERT_EQ(changes.seen.size(), 2u);
  changes.pending[1](absl::AlreadyExistsError("served already"));
  EXPECT_TRUE(got.back().ok()) << got.back();
}

TEST(AdaptersOnDemandTest, AtMostMaxLoadingNamesLoadAtOnce) {
  Changes changes;
  AdaptersOnDemand loader(changes.change(), /*max_loading=*/2);
  std::vector<absl::Status> got;
  auto record = [&](absl::Status st) { got.push_back(st); };
  loader.Load("a", record);
  loader.Load("b", record);
  loader.Load("c", record);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].code(), absl::StatusCode::kResourceExhausted) << got[0];
  EXPECT_EQ(changes.seen.size(), 2u);
  loader.Load("a", record);  // joins a's load
  EXPECT_EQ(changes.seen.size(), 2u);
  changes.pending[0](absl::NotFoundError("no such directory"));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(got[2].code(), absl::StatusCode::kNotFound);
  loader.Load("c", record);  // a's place is free
  EXPECT_EQ(changes.seen.size(), 3u);
  changes.pending[1](absl::OkStatus());
  changes.pending[2](absl::OkStatus());
  EXPECT_EQ(got.size(), 5u);
}

}  // namespace
}  // namespace pagellm
