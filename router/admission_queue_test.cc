#include "router/admission_queue.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::ElementsAre;

// Records what happened to each request, by name, in order.
struct Log {
  std::vector<std::string> events;
};

class FakeRequest final : public QueuedRequest {
 public:
  FakeRequest(std::string name, Log* log) : name_(std::move(name)), log_(log) {}
  void OnDispatched(Placement) override { log_->events.push_back("go " + name_); }
  void OnRejected(absl::Status s) override {
    log_->events.push_back(std::string(absl::StatusCodeToString(s.code())) + " " + name_);
  }

 private:
  std::string name_;
  Log* log_;
};

// Places requests while it has capacity (in prompt tokens); rejects those above `reject_above`.
class FakePlacer final : public Placer {
 public:
  int64_t capacity = 0;
  int64_t reject_above = 1 << 30;
  Decision Place(const AdmissionTicket& t, Placement* p, absl::Status* error) override {
    if (t.prompt_tokens > reject_above) {
      *error = absl::ResourceExhaustedError("never fits");
      return Decision::kReject;
    }
    if (t.prompt_tokens > capacity) return Decision::kWait;
    capacity -= t.prompt_tokens;
    p->reserved_blocks = t.prompt_tokens;
    return Decision::kPlace;
  }
};

class AdmissionQueueTest : public ::testing::Test {
 protected:
  AdmissionQueue queue_{AdmissionQueue::Options{/*max_size=*/3}};
  FakePlacer placer_;
  Log log_;
  FakeRequest a_{"a", &log_}, b_{"b", &log_}, c_{"c", &log_}, d_{"d", &log_};

  uint64_t Push(FakeRequest* r, int64_t tokens, absl::Time deadline = absl::InfiniteFuture()) {
    AdmissionTicket t;
    t.prompt_tokens = tokens;
    t.deadline = deadline;
    absl::StatusOr<uint64_t> id = queue_.Push(r, t);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }
};

TEST_F(AdmissionQueueTest, DispatchesInArrivalOrder) {
  Push(&a_, 1);
  Push(&b_, 1);
  Push(&c_, 1);
  placer_.capacity = 10;
  queue_.Pump(placer_);
  EXPECT_THAT(log_.events, ElementsAre("go a", "go b", "go c"));
  EXPECT_EQ(queue_.size(), 0u);
}

TEST_F(AdmissionQueueTest, HeadThatMustWaitBlocksLaterSmallerRequests) {
  Push(&a_, 5);
  Push(&b_, 1);
  placer_.capacity = 2;
  queue_.Pump(placer_);
  EXPECT_TRUE(log_.events.empty()) << "b must not overtake a";
  placer_.capacity = 6;
  queue_.Pump(placer_);
  EXPECT_THAT(log_.events, ElementsAre("go a", "go b"));
}

TEST_F(AdmissionQueueTest, FullQueueRefusesWithResourceExhausted) {
  Push(&a_, 1);
  Push(&b_, 1);
  Push(&c_, 1);
  absl::StatusOr<uint64_t> id = queue_.Push(&d_, AdmissionTicket{});
  EXPECT_EQ(id.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(queue_.size(), 3u);
}

TEST_F(AdmissionQueueTest, RetryGoesFirstAndIgnoresTheLimit) {
  Push(&a_, 1);
  Push(&b_, 1);
  Push(&c_, 1);
  queue_.PushFront(&d_, AdmissionTicket{});
  EXPECT_EQ(queue_.size(), 4u);
  placer_.capacity = 10;
  queue_.Pump(placer_);
  EXPECT_THAT(log_.events, ElementsAre("go d", "go a", "go b", "go c"));
}

// --scheduling-policy priority: (priority, arrival) order; a retry goes first in its priority.
// Without it priorities are ignored (the router refuses nonzero ones before they get here).
TEST_F(AdmissionQueueTest, ByPriorityOrdersByPriorityThenArrival) {
  for (const bool by_priority : {false, true}) {
    SCOPED_TRACE(by_priority ? "priority" : "fcfs");
    AdmissionQueue queue(AdmissionQueue::Options{8, by_priority});
    EXPECT_EQ(queue.by_priority(), by_priority);
    Log log;
    FakeRequest batch1("batch1", &log), batch2("batch2", &log), chat1("chat1", &log),
        chat2("chat2", &log), urgent("urgent", &log), retry("retry", &log);
    auto push = [&](FakeRequest* r, int32_t priority) {
      AdmissionTicket t;
      t.prompt_tokens = 1;
      t.priority = priority;
      ASSERT_TRUE(queue.Push(r, t).ok());
    };
    push(&batch1, 2);
    push(&chat1, 0);
    push(&batch2, 2);
    push(&urgent, -3);
    push(&chat2, 0);
    AdmissionTicket again;
    again.priority = 2;
    queue.PushFront(&retry, again);
    FakePlacer placer;
    placer.capacity = 10;
    queue.Pump(placer);
    if (by_priority) {
      EXPECT_THAT(log.events, ElementsAre("go urgent", "go chat1", "go chat2", "go retry",
                                          "go batch1", "go batch2"));
    } else {
      EXPECT_THAT(log.events, ElementsAre("go retry", "go batch1", "go chat1", "go batch2",
                                          "go urgent", "go chat2"));
    }
  }
}

TEST_F(AdmissionQueueTest, RemovedRequestGetsNoCallback) {
  Push(&a_, 1);
  const uint64_t b = Push(&b_, 1);
  EXPECT_TRUE(queue_.Remove(b));
  EXPECT_FALSE(queue_.Remove(b));
  placer_.capacity = 10;
  queue_.Pump(placer_);
  EXPECT_THAT(log_.events, ElementsAre("go a"));
}

TEST_F(AdmissionQueueTest, RemoveAfterDispatchReturnsFalse) {
  const uint64_t a = Push(&a_, 1);
  placer_.capacity = 1;
  queue_.Pump(placer_);
  EXPECT_FALSE(queue_.Remove(a));
}

TEST_F(AdmissionQueueTest, RejectedHeadLetsTheNextOneGo) {
  Push(&a_, 100);
  Push(&b_, 1);
  placer_.reject_above = 50;
  placer_.capacity = 10;
  queue_.Pump(placer_);
  EXPECT_THAT(log_.events, ElementsAre("RESOURCE_EXHAUSTED a", "go b"));
}

TEST_F(AdmissionQueueTest, ExpireRejectsOnlyPastDeadlines) {
  const absl::Time now = absl::Now();
  Push(&a_, 1, now + absl::Seconds(10));
  Push(&b_, 1, now - absl::Seconds(1));
  Push(&c_, 1, now);
  queue_.Expire(now);
  EXPECT_THAT(log_.events, ElementsAre("DEADLINE_EXCEEDED b", "DEADLINE_EXCEEDED c"));
  EXPECT_EQ(queue_.size(), 1u);
}

// A callback that pumps again (as a reactor does) must not deadlock or reorder.
class ReentrantRequest final : public QueuedRequest {
 public:
  ReentrantRequest(AdmissionQueue* q, Placer* p, Log* log) : q_(q), p_(p), log_(log) {}
  void OnDispatched(Placement) override {
    log_->events.push_back("go r");
    q_->Pump(*p_);
  }
  void OnRejected(absl::Status) override {}

 private:
  AdmissionQueue* q_;
  Placer* p_;
  Log* log_;
};

TEST_F(AdmissionQueueTest, PumpFromACallbackIsSafe) {
  ReentrantRequest r(&queue_, &placer_, &log_);
  queue_.Push(&r, AdmissionTicket{}).IgnoreError();
  Push(&a_, 1);
  placer_.capacity = 10;
  queue_.Pump(placer_);
  EXPECT_THAT(log_.events, ElementsAre("go r", "go a"));
}

}  // namespace
}  // namespace pagellm
