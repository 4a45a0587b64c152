// A valid one-tensor qwen35moe GGUF for supervisor tests: the supervisor
// opens and validates the file before any worker (real or fake) sees it, and
// the fake workers build nothing from it.
#ifndef SLUICE_DAEMON_TESTING_TINY_MODEL_H_
#define SLUICE_DAEMON_TESTING_TINY_MODEL_H_

#include <string>

namespace sluice::daemon::testing {

// Writes it into a new temporary directory; returns its path. Its tensors
// take 128 bytes.
std::string WriteTinyModel();

}  // namespace sluice::daemon::testing

#endif  // SLUICE_DAEMON_TESTING_TINY_MODEL_H_
