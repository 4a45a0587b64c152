// A boolean switch from the environment (the SLUICE_CUDA_* kernel choices of
// docs/CUDA_KERNELS.md): read on first use, settable at any time by a test.
//
// Thread-safety: on() and Set() may be called from any thread; a Set()
// racing the first on() wins over the environment.
#ifndef SLUICE_BASE_ENV_SWITCH_H_
#define SLUICE_BASE_ENV_SWITCH_H_

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace sluice {

class EnvSwitch {
 public:
  // `name` set to "1" turns the switch on, "0" off; unset or anything else
  // leaves it at `fallback`.
  constexpr EnvSwitch(const char* name, bool fallback) : name_(name), fallback_(fallback) {}
  EnvSwitch(const EnvSwitch&) = delete;
  EnvSwitch& operator=(const EnvSwitch&) = delete;

  bool on() const {
    int v = state_.load(std::memory_order_relaxed);
    if (v < 0) {
      const char* env = std::getenv(name_);
      v = fallback_ ? 1 : 0;
      if (env != nullptr && std::strcmp(env, "1") == 0) v = 1;
      if (env != nullptr && std::strcmp(env, "0") == 0) v = 0;
      int expected = -1;
      if (!state_.compare_exchange_strong(expected, v)) v = expected;
    }
    return v == 1;
  }
  void Set(bool on) { state_.store(on ? 1 : 0); }

 private:
  const char* name_;
  bool fallback_;
  mutable std::atomic<int> state_{-1};  // -1: not read yet
};

}  // namespace sluice

#endif  // SLUICE_BASE_ENV_SWITCH_H_
