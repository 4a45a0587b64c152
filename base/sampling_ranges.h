// The valid range of each sampling parameter and the wording of a value
// outside it, written once: the daemon checks a request against these before
// it queues it (daemon/request_limits.cc) and the worker's sampler checks its
// parameters again (model/sampler.cc), so both answer alike.
#ifndef SLUICE_BASE_SAMPLING_RANGES_H_
#define SLUICE_BASE_SAMPLING_RANGES_H_

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace sluice {

// Each returns the range's text when v is outside it, else nullptr. Written
// as !(in range) so that NaN is outside every range.
inline const char* TemperatureOutside(double v) {
  return !(v >= 0) || std::isinf(v) ? "[0, inf)" : nullptr;
}
inline const char* TopPOutside(double v) { return !(v > 0 && v <= 1) ? "(0, 1]" : nullptr; }
inline const char* MinPOutside(double v) { return !(v >= 0 && v <= 1) ? "[0, 1]" : nullptr; }
inline const char* RepetitionPenaltyOutside(double v) {
  return !(v > 0) || std::isinf(v) ? "(0, inf)" : nullptr;
}
inline const char* CountOutside(double v) { return v < 0 ? "[0, inf)" : nullptr; }

// "sampler: FIELD = VALUE is outside RANGE", after `prefix` when not empty.
inline absl::Status SamplingOutOfRange(const char* prefix, const char* field, double value,
                                       const char* range) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%ssampler: %s = %g is outside %s", prefix, field, value, range));
}

}  // namespace sluice

#endif  // SLUICE_BASE_SAMPLING_RANGES_H_
