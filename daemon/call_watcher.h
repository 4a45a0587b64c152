// One thread that notices cancelled gRPC calls for all waiting handlers.
//
// Why: gRPC's synchronous API has no wake-up for a client cancellation, and
// a handler that polled its own call every few milliseconds made 1000
// waiting requests cost the supervisor two cores. Handlers instead block on
// their request's events (absl::Mutex::Await, no polling) and register here;
// the watcher checks registered calls round-robin, a bounded number per
// period, and interrupts the ones whose client went away.
//
// Thread-safety: all methods may be called from any thread. A callback runs
// on the watcher thread with the watcher's lock held: it must not call
// Watch() or Unwatch(). After Unwatch() returns, the callback is not running
// and will not run.
#ifndef SLUICE_DAEMON_CALL_WATCHER_H_
#define SLUICE_DAEMON_CALL_WATCHER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace sluice::daemon {

class CallWatcher {
 public:
  // Calls checked per sweep: a cancel is noticed within one period while at
  // most this many calls wait, within calls/kChecksPerSweep periods beyond.
  static constexpr int kChecksPerSweep = 8;

  explicit CallWatcher(absl::Duration period = absl::Milliseconds(100));
  ~CallWatcher();
  CallWatcher(const CallWatcher&) = delete;
  CallWatcher& operator=(const CallWatcher&) = delete;

  // Calls `on_cancelled` once, soon after `context->IsCancelled()` turns true
  // (a client cancel, a broken connection or an expired deadline). Returns a
  // token for Unwatch(). `context` must stay valid until Unwatch().
  uint64_t Watch(grpc::ServerContext* context, std::function<void()> on_cancelled);
  void Unwatch(uint64_t token);

  // Calls currently watched (for tests and metrics).
  size_t size();

 private:
  struct Entry {
    grpc::ServerContext* context;
    std::function<void()> on_cancelled;
  };
  void Loop();

  const absl::Duration period_;
  absl::Mutex mu_;
  std::map<uint64_t, Entry> calls_ ABSL_GUARDED_BY(mu_);
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t resume_token_ ABSL_GUARDED_BY(mu_) = 0;  // where the next sweep starts
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_CALL_WATCHER_H_
