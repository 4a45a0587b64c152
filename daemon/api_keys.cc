#include "daemon/api_keys.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sluice::daemon {
namespace {

constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void Compress(uint32_t state[8], const uint8_t block[64]) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = uint32_t{block[4 * i]} << 24 | uint32_t{block[4 * i + 1]} << 16 |
           uint32_t{block[4 * i + 2]} << 8 | uint32_t{block[4 * i + 3]};
  }
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 = h + (Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                        kRoundConstants[i] + w[i];
    const uint32_t t2 = (Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a; state[1] += b; state[2] += c; state[3] += d;
  state[4] += e; state[5] += f; state[6] += g; state[7] += h;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::array<uint8_t, 32> Sha256(std::string_view data) {
  uint32_t state[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  size_t i = 0;
  for (; i + 64 <= data.size(); i += 64) {
    Compress(state, reinterpret_cast<const uint8_t*>(data.data() + i));
  }
  uint8_t tail[128] = {};
  const size_t rest = data.size() - i;
  for (size_t j = 0; j < rest; ++j) tail[j] = static_cast<uint8_t>(data[i + j]);
  tail[rest] = 0x80;
  const size_t tail_len = rest + 1 + 8 <= 64 ? 64 : 128;
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  for (int j = 0; j < 8; ++j) tail[tail_len - 1 - j] = static_cast<uint8_t>(bits >> (8 * j));
  Compress(state, tail);
  if (tail_len == 128) Compress(state, tail + 64);
  std::array<uint8_t, 32> out;
  for (int j = 0; j < 8; ++j) {
    for (int k = 0; k < 4; ++k) out[4 * j + k] = static_cast<uint8_t>(state[j] >> (24 - 8 * k));
  }
  return out;
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
