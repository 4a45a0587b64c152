#include "daemon/call_watcher.h"

#include <pthread.h>

#include <utility>

namespace sluice::daemon {

CallWatcher::CallWatcher(absl::Duration period) : period_(period) {
  thread_ = std::thread([this] { Loop(); });
}

CallWatcher::~CallWatcher() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

uint64_t CallWatcher::Watch(grpc::ServerContext* context, std::function<void()> on_cancelled) {
  absl::MutexLock lock(&mu_);
  const uint64_t token = next_token_++;
  calls_.emplace(token, Entry{context, std::move(on_cancelled)});
  return token;
}

void CallWatcher::Unwatch(uint64_t token) {
  absl::MutexLock lock(&mu_);
  calls_.erase(token);
}

size_t CallWatcher::size() {
  absl::MutexLock lock(&mu_);
  return calls_.size();
}

void CallWatcher::Loop() {
  pthread_setname_np(pthread_self(), "call-watcher");
  absl::MutexLock lock(&mu_);
  while (true) {
    // Sleeps while nothing is watched; otherwise one sweep per period.
    auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    if (calls_.empty()) {
      auto busy = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !calls_.empty(); };
      mu_.Await(absl::Condition(&busy));
    } else {
      mu_.AwaitWithTimeout(absl::Condition(&wake), period_);
    }
    if (stop_) return;
    // IsCancelled() on a synchronous call plucks its completion queue (a
    // poll), so each sweep checks a bounded slice, round-robin: with many
    // waiting calls a cancel is noticed a little later, at a constant cost.
    auto it = calls_.lower_bound(resume_token_);
    for (int checked = 0; checked < kChecksPerSweep && !calls_.empty(); ++checked) {
      if (it == calls_.end()) it = calls_.begin();
      if (it->second.context->IsCancelled()) {
        it->second.on_cancelled();
        it = calls_.erase(it);
      } else {
        ++it;
      }
    }
    resume_token_ = it == calls_.end() ? 0 : it->first;
  }
}

}  // namespace sluice::daemon
