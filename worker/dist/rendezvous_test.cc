#include "worker/dist/rendezvous.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/store.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

class RendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RendezvousServer::Options o;
    o.max_keys = 3;
    o.max_key_bytes = 16;
    o.max_value_bytes = 64;
    o.max_keys_per_get = 2;
    auto s = RendezvousServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  std::unique_ptr<gloo::rendezvous::Store> Store(absl::Duration timeout = absl::Seconds(10)) {
    return MakeRendezvousStore("127.0.0.1:" + std::to_string(server_->port()), timeout);
  }
  static std::vector<char> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

  std::unique_ptr<RendezvousServer> server_;
};

TEST_F(RendezvousTest, AGetWaitsForTheKeyAnotherRankSets) {
  auto reader = Store();
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(100));
    Store()->set("rank1", Bytes("addr"));
  });
  EXPECT_EQ(reader->get("rank1"), Bytes("addr"));
  writer.join();
}

TEST_F(RendezvousTest, WaitReturnsOnceEveryKeyIsSet) {
  auto store = Store();
  store->set("a", Bytes("1"));
  store->set("b", Bytes(""));
  store->wait({"a", "b"}, std::chrono::milliseconds(1000));
  EXPECT_EQ(store->get("b"), Bytes(""));
}

TEST_F(RendezvousTest, AMissingKeyTimesOut) {
  auto store = Store(absl::Milliseconds(300));
  const absl::Time start = absl::Now();
  try {
    store->get("never");
    FAIL() << "get of a missing key returned";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find("timeout"), std::string::npos) << e.what();
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST_F(RendezvousTest, SizesAreBounded) {
  auto store = Store();
  EXPECT_THROW(store->set(std::string(17, 'k'), Bytes("v")), gloo::IoException);
  EXPECT_THROW(store->set("", Bytes("v")), gloo::IoException);
  EXPECT_THROW(store->set("k", Bytes(std::string(65, 'v'))), gloo::IoException);
  EXPECT_THROW(store->wait({"a", "b", "c"}, std::chrono::milliseconds(100)), gloo::IoException);
  store->set("k1", Bytes("v"));
  store->set("k2", Bytes("v"));
  store->set("k3", Bytes("v"));
  store->set("k3", Bytes("w"));  // overwriting adds no key
  EXPECT_THROW(store->set("k4", Bytes("v")), gloo::IoException);
  EXPECT_EQ(store->get("k3"), Bytes("w"));
}

TEST_F(RendezvousTest, ShutdownEndsAWaitingGet) {
  auto store = Store(absl::Seconds(30));
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(200));
    server_->Shutdown();
  });
  const absl::Time start = absl::Now();
  EXPECT_THROW(store->get("never"), gloo::IoException);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  stopper.join();
}

}  // namespace
}  // namespace pagellm
