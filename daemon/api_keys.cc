#include "daemon/api_keys.h"

#include <openssl/sha.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sluice::daemon {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::array<uint8_t, 32> Sha256(std::string_view data) {
  static_assert(SHA256_DIGEST_LENGTH == 32);
  std::array<uint8_t, 32> digest;
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest.data());
  return digest;
}

std::string Sha256Hex(std::string_view data) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : Sha256(data)) {
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 15]);
  }
  return hex;
}

absl::StatusOr<ApiKeys> ApiKeys::LoadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--api_keys_file='", path, "': cannot open the file"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

absl::StatusOr<ApiKeys> ApiKeys::Parse(std::string_view text, const std::string& name) {
  ApiKeys keys;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_no;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", line_no, ": ", why));
    };
    if (fields.size() != 2) return bad("expected '<sha256 hex> <generate|admin>'");
    Key key;
    if (fields[0].size() != 64) return bad("the key hash must be 64 hex digits (SHA-256)");
    for (int i = 0; i < 32; ++i) {
      const int hi = HexValue(fields[0][2 * i]), lo = HexValue(fields[0][2 * i + 1]);
      if (hi < 0 || lo < 0) return bad("the key hash must be 64 hex digits (SHA-256)");
      key.sha256[i] = static_cast<uint8_t>(hi << 4 | lo);
    }
    if (fields[1] == "generate") {
      key.role = Role::kGenerate;
    } else if (fields[1] == "admin") {
      key.role = Role::kAdmin;
    } else {
      return bad(absl::StrCat("role '", fields[1].substr(0, 32), "': expected generate or admin"));
    }
    keys.keys_.push_back(key);
  }
  if (keys.keys_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": holds no key"));
  }
  return keys;
}

absl::Status ApiKeys::Check(std::string_view authorization_value, Role needed) const {
  if (!enabled()) return absl::OkStatus();
  absl::string_view value(authorization_value.data(), authorization_value.size());
  value = absl::StripAsciiWhitespace(value);
  if (value.empty()) {
    return absl::UnauthenticatedError(
        "an API key is required: send 'authorization: Bearer <key>'");
  }
  if (value.size() < 7 || !absl::StartsWithIgnoreCase(value, "bearer ")) {
    return absl::UnauthenticatedError(
        "malformed authorization: expected 'Bearer <key>'");
  }
  const absl::string_view key = absl::StripLeadingAsciiWhitespace(value.substr(7));
  const Digest presented = Sha256(std::string_view(key.data(), key.size()));
  // Every stored key is compared in full; the match is selected without a
  // data-dependent branch.
  uint8_t matched = 0;
  uint8_t admin = 0;
  for (const Key& k : keys_) {
    uint8_t diff = 0;
    for (size_t i = 0; i < presented.size(); ++i) diff |= presented[i] ^ k.sha256[i];
    const uint8_t same = static_cast<uint8_t>(1 & ((static_cast<unsigned>(diff) - 1) >> 8));
    matched |= same;
    admin |= same & static_cast<uint8_t>(k.role == Role::kAdmin);
  }
  if (!matched) return absl::UnauthenticatedError("invalid API key");
  if (needed == Role::kAdmin && !admin) {
    return absl::PermissionDeniedError("this call needs an admin API key");
  }
  return absl::OkStatus();
}

}  // namespace sluice::daemon
