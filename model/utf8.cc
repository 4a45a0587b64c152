#include "model/utf8.h"

namespace sluice {

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

Utf8Sequence ScanUtf8(std::string_view bytes) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return {Utf8Sequence::Kind::kValid, 1};
  // Length and the allowed range of the second byte by lead byte; the
  // narrowed ranges exclude overlong forms, surrogates and > U+10FFFF.
  size_t length = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Sequence::Kind::kInvalid, 1};
  }
  for (size_t k = 1; k < length; ++k) {
    if (k >= bytes.size()) return {Utf8Sequence::Kind::kTruncated, k};
    const uint8_t b = byte(k);
    if (b < lo || b > hi) return {Utf8Sequence::Kind::kInvalid, k};
    lo = 0x80;
    hi = 0xBF;
  }
  return {Utf8Sequence::Kind::kValid, length};
}

namespace {

// Appends the well-formed text of `bytes` to `out`; returns how many bytes at
// the end form a truncated sequence (left unconsumed when `keep_tail`).
size_t AppendSanitized(std::string_view bytes, bool keep_tail,
                       std::string& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    const Utf8Sequence seq = ScanUtf8(bytes.substr(i));
    switch (seq.kind) {
      case Utf8Sequence::Kind::kValid:
        out.append(bytes.substr(i, seq.length));
        break;
      case Utf8Sequence::Kind::kTruncated:
        if (keep_tail) return bytes.size() - i;
        AppendUtf8(kReplacementCharacter, out);
        break;
      case Utf8Sequence::Kind::kInvalid:
        AppendUtf8(kReplacementCharacter, out);
        break;
    }
    i += seq.length;
  }
  return 0;
}

}  // namespace

std::string SanitizeUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  AppendSanitized(bytes, /*keep_tail=*/false, out);
  return out;
}

std::string Utf8StreamDecoder::Push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  const size_t tail = AppendSanitized(pending_, /*keep_tail=*/true, out);
  pending_.erase(0, pending_.size() - tail);
  return out;
}

std::string Utf8StreamDecoder::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace sluice
