// The supervisor's requests as plain data (issue 19): those waiting, in
// arrival order, and those sent to the worker and not yet answered, by
// request id. No locks, clock or process: the supervisor holds it under its
// lock and sends what TakeSendable() returns; request_queue_test drives it
// alone.
//
// The rules:
//   * at most `queue_limit` requests wait; Admits() refuses one more with
//     RESOURCE_EXHAUSTED (what is in flight does not count);
//   * at most `limit` generations are in flight (the worker's
//     max_sequences; the caller passes it, since it follows the model); a
//     Tokenize does not count, the worker answers it between steps;
//   * nothing overtakes: a generation waiting for room holds back what
//     arrived after it, a Tokenize too.
//
// `Handle` has `uint64_t id() const` (unique among live requests) and
// `bool generate() const` (a generation, not a Tokenize).
#ifndef SLUICE_DAEMON_REQUEST_QUEUE_H_
#define SLUICE_DAEMON_REQUEST_QUEUE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sluice::daemon {

template <typename Handle>
class RequestQueue {
 public:
  using Ptr = std::shared_ptr<Handle>;

  explicit RequestQueue(int queue_limit) : queue_limit_(queue_limit) {}

  // Whether a request submitted now would be sent at once: the worker is
  // ready, nothing waits and, for a generation, fewer than `limit` are in
  // flight.
  bool RunsNow(bool generate, int limit, bool worker_ready) const {
    return worker_ready && waiting_.empty() && (!generate || generations_ < limit);
  }

  // OK when a request may be pushed now (it runs at once or there is room
  // to wait); RESOURCE_EXHAUSTED naming the limit otherwise.
  absl::Status Admits(bool generate, int limit, bool worker_ready) const {
    if (RunsNow(generate, limit, worker_ready) ||
        waiting_.size() < static_cast<size_t>(queue_limit_)) {
      return absl::OkStatus();
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "request queue is full: ", waiting_.size(), " requests waiting (queue_limit ",
        queue_limit_, "); retry later"));
  }

  // Queues `h` behind everything queued before it.
  void Push(Ptr h) { waiting_.push_back(std::move(h)); }

  // The waiting requests that may go to the worker now, in arrival order,
  // moved to in flight (the rules above).
  std::vector<Ptr> TakeSendable(int limit) {
    std::vector<Ptr> out;
    while (!waiting_.empty() && (!waiting_.front()->generate() || generations_ < limit)) {
      Ptr h = std::move(waiting_.front());
      waiting_.pop_front();
      if (h->generate()) ++generations_;
      in_flight_.emplace(h->id(), h);
      out.push_back(std::move(h));
    }
    return out;
  }

  // Request `id` in flight, or null.
  Ptr InFlight(uint64_t id) const {
    const auto it = in_flight_.find(id);
    return it == in_flight_.end() ? nullptr : it->second;
  }

  // Removes request `id` from in flight and returns it (null when it is
  // not in flight). The caller then sends what TakeSendable() allows.
  Ptr Finish(uint64_t id) {
    const auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return nullptr;
    Ptr h = std::move(it->second);
    in_flight_.erase(it);
    if (h->generate()) --generations_;
    return h;
  }

  // Removes `h` from the waiting requests; false when it is not waiting.
  bool RemoveWaiting(const Ptr& h) {
    const auto it = std::find(waiting_.begin(), waiting_.end(), h);
    if (it == waiting_.end()) return false;
    waiting_.erase(it);
    return true;
  }

  // Every request, in flight (by id) then waiting (in order); empty after.
  std::vector<Ptr> TakeAll() {
    std::vector<Ptr> out;
    for (auto& [id, h] : in_flight_) out.push_back(std::move(h));
    for (Ptr& h : waiting_) out.push_back(std::move(h));
    in_flight_.clear();
    waiting_.clear();
    generations_ = 0;
    return out;
  }

  // The ids in flight, ascending.
  std::vector<uint64_t> InFlightIds() const {
    std::vector<uint64_t> ids;
    for (const auto& entry : in_flight_) ids.push_back(entry.first);
    return ids;
  }

  size_t waiting() const { return waiting_.size(); }
  size_t in_flight() const { return in_flight_.size(); }
  int in_flight_generations() const { return generations_; }
  bool empty() const { return waiting_.empty() && in_flight_.empty(); }

 private:
  const int queue_limit_;
  std::deque<Ptr> waiting_;
  std::map<uint64_t, Ptr> in_flight_;
  int generations_ = 0;  // of in_flight_
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_REQUEST_QUEUE_H_
