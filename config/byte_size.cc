#include "config/byte_size.h"

#include <cctype>
#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice::config {

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view what, absl::string_view value) {
  std::string v(absl::StripAsciiWhitespace(value));
  if (absl::EndsWithIgnoreCase(v, "ib")) {
    v.resize(v.size() - 2);
  } else if (absl::EndsWithIgnoreCase(v, "b")) {
    v.resize(v.size() - 1);
  }
  uint64_t scale = 1;
  if (!v.empty() && std::isalpha(static_cast<unsigned char>(v.back()))) {
    switch (std::toupper(static_cast<unsigned char>(v.back()))) {
      case 'K': scale = 1ull << 10; break;
      case 'M': scale = 1ull << 20; break;
      case 'G': scale = 1ull << 30; break;
      case 'T': scale = 1ull << 40; break;
      default: scale = 0;
    }
    v.pop_back();
  }
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        what, "='", value, "': expected a byte count such as 536870912, 512M, 1.5G or 8G"));
  };
  if (scale == 0 || v.empty()) return bad();
  if (v.find('.') != std::string::npos) {
    // A fraction ("1.5G"): digits and one point only, rounded to the byte.
    for (char c : v) {
      if (c != '.' && !std::isdigit(static_cast<unsigned char>(c))) return bad();
    }
    double d = 0;
    if (!absl::SimpleAtod(v, &d) || !std::isfinite(d) ||
        d * static_cast<double>(scale) >= 1.8e19) {
      return bad();
    }
    return static_cast<uint64_t>(std::llround(d * static_cast<double>(scale)));
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(v, &n) || (n != 0 && scale > UINT64_MAX / n)) return bad();
  return n * scale;
}

}  // namespace sluice::config
