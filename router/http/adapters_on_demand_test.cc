#include "router/http/adapters_on_demand.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
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
  AdaptersOnDemand loader(changes.change(), {.max_loading = 2});
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
  changes.pending[0](absl::NotFoundError("no such directory"));  // a is remembered
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(got[2].code(), absl::StatusCode::kNotFound);
  loader.Load("c", record);  // a's place is free
  EXPECT_EQ(changes.seen.size(), 3u);
  changes.pending[1](absl::OkStatus());
  changes.pending[2](absl::OkStatus());
  EXPECT_EQ(got.size(), 5u);
}

// A client that keeps naming a model that does not exist: the workers search their disks for
// it once per not_found_for, not once per request.
TEST(AdaptersOnDemandTest, ANameNoWorkerFindsIsAnsweredAtOnceForAWhile) {
  Changes changes;
  absl::Time now = absl::FromUnixSeconds(1000);
  AdaptersOnDemand loader(
      changes.change(),
      {.not_found_for = absl::Seconds(10), .max_not_found = 2, .clock = [&] { return now; }});
  std::vector<absl::Status> got;
  auto record = [&](absl::Status st) { got.push_back(st); };
  loader.Load("typo", record);
  ASSERT_EQ(changes.seen.size(), 1u);
  changes.pending[0](absl::NotFoundError("no directory typo"));
  for (int i = 0; i < 100; ++i) loader.Load("typo", record);
  EXPECT_EQ(changes.seen.size(), 1u) << "the workers were asked again";
  ASSERT_EQ(got.size(), 101u);
  for (const absl::Status& st : got) {
    EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(st.message(), "no directory typo");
  }
  // Other outcomes are not remembered: a failed load is tried again at once.
  loader.Load("broken", record);
  changes.pending[1](absl::InvalidArgumentError("not an adapter of this model"));
  loader.Load("broken", record);
  EXPECT_EQ(changes.seen.size(), 3u);
  changes.pending[2](absl::OkStatus());
  // After not_found_for, the workers are asked again (the directory may exist now).
  now += absl::Seconds(10);
  loader.Load("typo", record);
  ASSERT_EQ(changes.seen.size(), 4u);
  EXPECT_EQ(changes.seen[3].lora_name, "typo");
  changes.pending[3](absl::OkStatus());
  EXPECT_TRUE(got.back().ok()) << got.back();

  // At most max_not_found names: a third one pushes out the one that expires first.
  for (const char* name : {"x", "y", "z"}) {
    loader.Load(name, record);
    changes.pending.back()(absl::NotFoundError(name));
    now += absl::Seconds(1);
  }
  const size_t asked = changes.seen.size();
  loader.Load("y", record);
  loader.Load("z", record);
  EXPECT_EQ(changes.seen.size(), asked) << "y and z are remembered";
  loader.Load("x", record);
  EXPECT_EQ(changes.seen.size(), asked + 1) << "x was pushed out";
}

}  // namespace
}  // namespace pagellm
