#include "daemon/request_queue.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

struct FakeRequest {
  uint64_t request_id = 0;
  bool is_generate = true;
  uint64_t id() const { return request_id; }
  bool generate() const { return is_generate; }
};

using Queue = RequestQueue<FakeRequest>;

std::shared_ptr<FakeRequest> Generation(uint64_t id) {
  return std::make_shared<FakeRequest>(FakeRequest{id, true});
}
std::shared_ptr<FakeRequest> Tokenize(uint64_t id) {
  return std::make_shared<FakeRequest>(FakeRequest{id, false});
}

std::vector<uint64_t> Ids(const std::vector<std::shared_ptr<FakeRequest>>& hs) {
  std::vector<uint64_t> ids;
  for (const auto& h : hs) ids.push_back(h->id());
  return ids;
}

TEST(RequestQueueTest, SendsUpToTheLimitOfGenerationsInArrivalOrder) {
  Queue q(/*queue_limit=*/8);
  for (uint64_t id = 1; id <= 5; ++id) q.Push(Generation(id));
  EXPECT_EQ(Ids(q.TakeSendable(/*limit=*/3)), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(q.in_flight(), 3u);
  EXPECT_EQ(q.in_flight_generations(), 3);
  EXPECT_EQ(q.waiting(), 2u);
  EXPECT_TRUE(q.TakeSendable(3).empty());
  // One ends: exactly one more goes.
  ASSERT_NE(q.Finish(2), nullptr);
  EXPECT_EQ(Ids(q.TakeSendable(3)), (std::vector<uint64_t>{4}));
  EXPECT_EQ(q.InFlightIds(), (std::vector<uint64_t>{1, 3, 4}));
  EXPECT_EQ(q.InFlight(3)->id(), 3u);
  EXPECT_EQ(q.InFlight(2), nullptr);
  EXPECT_EQ(q.Finish(2), nullptr) << "finished twice";
}

TEST(RequestQueueTest, TokenizeDoesNotCountButDoesNotOvertake) {
  Queue q(8);
  q.Push(Generation(1));
  q.Push(Tokenize(2));
  q.Push(Generation(3));
  q.Push(Tokenize(4));
  // One generation of room: 1 and the Tokenize behind it go; 3 waits for
  // room and holds back 4.
  EXPECT_EQ(Ids(q.TakeSendable(1)), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(q.in_flight_generations(), 1);
  EXPECT_EQ(q.waiting(), 2u);
  ASSERT_NE(q.Finish(2), nullptr);
  EXPECT_TRUE(q.TakeSendable(1).empty()) << "a Tokenize's answer frees no room";
  ASSERT_NE(q.Finish(1), nullptr);
  EXPECT_EQ(Ids(q.TakeSendable(1)), (std::vector<uint64_t>{3, 4}));
  // With the worker full, a Tokenize still runs now when nothing waits.
  EXPECT_TRUE(q.RunsNow(/*generate=*/false, 1, /*worker_ready=*/true));
  EXPECT_FALSE(q.RunsNow(/*generate=*/true, 1, true));
}

TEST(RequestQueueTest, QueueLimitCountsOnlyWhatWaits) {
  Queue q(/*queue_limit=*/1);
  // Two run at once, one waits, the fourth is refused.
  EXPECT_TRUE(q.Admits(true, 2, true).ok());
  q.Push(Generation(1));
  q.TakeSendable(2);
  EXPECT_TRUE(q.Admits(true, 2, true).ok());
  q.Push(Generation(2));
  q.TakeSendable(2);
  EXPECT_TRUE(q.Admits(true, 2, true).ok());
  q.Push(Generation(3));
  EXPECT_TRUE(q.TakeSendable(2).empty());
  const absl::Status full = q.Admits(true, 2, true);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(), "request queue is full: 1 requests waiting (queue_limit 1); retry later");
  // A worker that is not ready runs nothing now: its requests wait.
  Queue starting(1);
  EXPECT_FALSE(starting.RunsNow(true, 2, /*worker_ready=*/false));
  starting.Push(Generation(1));
  EXPECT_EQ(starting.Admits(true, 2, false).code(), absl::StatusCode::kResourceExhausted);
}

TEST(RequestQueueTest, RemoveWaitingAndTakeAll) {
  Queue q(8);
  auto a = Generation(1), b = Generation(2), c = Tokenize(3);
  q.Push(a);
  q.Push(b);
  q.Push(c);
  q.TakeSendable(1);
  EXPECT_FALSE(q.RemoveWaiting(a)) << "in flight, not waiting";
  EXPECT_TRUE(q.RemoveWaiting(b));
  EXPECT_EQ(q.waiting(), 1u);
  EXPECT_EQ(Ids(q.TakeAll()), (std::vector<uint64_t>{1, 3}));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.in_flight_generations(), 0);
  q.Push(Generation(4));
  EXPECT_EQ(Ids(q.TakeSendable(1)), (std::vector<uint64_t>{4}));
}

}  // namespace
}  // namespace sluice::daemon
