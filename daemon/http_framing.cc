#include "daemon/http_framing.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sluice::daemon {
namespace {

constexpr size_t kMaxChunkLine = 1024;

bool NameIs(absl::string_view line, absl::string_view name) {
  return line.size() > name.size() && line[name.size()] == ':' &&
         absl::EqualsIgnoreCase(line.substr(0, name.size()), name);
}

absl::string_view ValueOf(absl::string_view line) {
  return absl::StripAsciiWhitespace(line.substr(line.find(':') + 1));
}

}  // namespace

bool RequestFraming::Refuse(int status, std::string why) {
  state_ = State::kRefused;
  refusal_status_ = status;
  refusal_ = std::move(why);
  return false;
}

bool RequestFraming::GrowBody(size_t more) {
  if (body_.size() + more > limits_.max_body_bytes) {
    return Refuse(413, absl::StrCat("the request body exceeds ", limits_.max_body_bytes,
                                    " bytes"));
  }
  return true;
}

size_t RequestFraming::Consume(absl::string_view data) {
  size_t used = 0;
  if (state_ == State::kHeaders) used += ConsumeHead(data);
  if (state_ == State::kBody && used < data.size()) {
    absl::string_view rest = data.substr(used);
    if (chunked_) {
      used += ConsumeChunked(rest);
    } else {
      const size_t take = std::min(rest.size(), declared_length_ - body_.size());
      body_.append(rest.data(), take);
      used += take;
    }
  }
  if (state_ == State::kBody && !chunked_ && body_.size() == declared_length_) {
    state_ = State::kComplete;
    absl::StrAppend(&head_, "Content-Length: ", body_.size(), "\r\n\r\n");
  }
  return used;
}

size_t RequestFraming::ConsumeHead(absl::string_view data) {
  // The end may straddle two reads: search from 3 bytes before the new ones.
  const size_t old = raw_head_.size();
  const size_t room = limits_.max_header_bytes + 4 - old;
  raw_head_.append(data.data(), std::min(data.size(), room));
  const size_t end = raw_head_.find("\r\n\r\n", old < 3 ? 0 : old - 3);
  if (end == std::string::npos) {
    if (raw_head_.size() > limits_.max_header_bytes) {
      Refuse(431, absl::StrCat("the request headers exceed ", limits_.max_header_bytes,
                               " bytes"));
    }
    return std::min(data.size(), room);
  }
  const size_t used = end + 4 - old;
  raw_head_.resize(end + 2);  // keeps the last header line's CRLF
  if (ParseHead()) state_ = State::kBody;
  return used;
}

bool RequestFraming::ParseHead() {
  std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(raw_head_), "\r\n", absl::SkipEmpty());
  if (lines.empty()) return Refuse(400, "the request line is missing");
  std::vector<absl::string_view> words = absl::StrSplit(lines[0], ' ');
  if (words.size() != 3 || !absl::StartsWith(words[2], "HTTP/1.")) {
    return Refuse(400, "the request line is not 'METHOD TARGET HTTP/1.x'");
  }
  method_ = std::string(words[0]);
  http10_ = words[2] == "HTTP/1.0";
  bool has_length = false;
  absl::StrAppend(&head_, lines[0], "\r\n");
  for (size_t i = 1; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    if (line.find(':') == absl::string_view::npos) {
      return Refuse(400, "a header line has no ':'");
    }
    if (NameIs(line, "content-length")) {
      uint64_t n = 0;
      if (!absl::SimpleAtoi(ValueOf(line), &n) || (has_length && n != declared_length_)) {
        return Refuse(400, "Content-Length is not one number");
      }
      has_length = true;
      declared_length_ = n;
      if (n > limits_.max_body_bytes) {
        return Refuse(413, absl::StrCat("Content-Length ", n, " exceeds the limit of ",
                                        limits_.max_body_bytes, " bytes"));
      }
    } else if (NameIs(line, "transfer-encoding")) {
      if (!absl::EqualsIgnoreCase(ValueOf(line), "chunked")) {
        return Refuse(501, "only the chunked transfer coding is supported");
      }
      chunked_ = true;
    } else if (NameIs(line, "expect")) {
      expect_continue_ = absl::EqualsIgnoreCase(ValueOf(line), "100-continue");
    } else {
      absl::StrAppend(&head_, line, "\r\n");
    }
  }
  if (chunked_ && has_length) {
    return Refuse(400, "both Content-Length and Transfer-Encoding are given");
  }
  raw_head_.clear();
  raw_head_.shrink_to_fit();
  // The front has budgeted the declared length (http_front.h); a chunked
  // body grows as it arrives.
  if (!chunked_) body_.reserve(declared_length_);
  return true;
}

// Between chunks a line is read byte by byte into line_: a size in hex
// (extensions after ';' ignored), the CRLF after the data, or a trailer line.
size_t RequestFraming::ConsumeChunked(absl::string_view data) {
  size_t i = 0;
  while (i < data.size() && state_ == State::kBody) {
    if (chunk_ == Chunk::kData) {
      const size_t take = std::min(data.size() - i, chunk_left_);
      body_.append(data.data() + i, take);
      i += take;
      chunk_left_ -= take;
      if (chunk_left_ == 0) chunk_ = Chunk::kDataEnd;
      continue;
    }
    const char c = data[i++];
    if (c != '\n') {
      line_.push_back(c);
      if (line_.size() > kMaxChunkLine) Refuse(400, "a chunk-size line is too long");
      continue;
    }
    const absl::string_view line = absl::StripSuffix(line_, "\r");
    if (chunk_ == Chunk::kDataEnd) {
      if (!line.empty()) Refuse(400, "chunk data is not followed by CRLF");
      chunk_ = Chunk::kSize;
    } else if (chunk_ == Chunk::kSize) {
      uint64_t size = 0;
      const absl::string_view hex = absl::StripAsciiWhitespace(line.substr(0, line.find(';')));
      if (hex.empty() || hex.size() > 15 || !absl::SimpleHexAtoi(hex, &size)) {
        Refuse(400, "a chunk size is not a hexadecimal number");
      } else if (GrowBody(size)) {
        chunk_left_ = size;
        chunk_ = size == 0 ? Chunk::kTrailer : Chunk::kData;
      }
    } else {  // trailers, ignored, up to an empty line
      trailer_bytes_ += line_.size();
      if (trailer_bytes_ > limits_.max_header_bytes) Refuse(431, "the trailers are too long");
      if (line.empty()) state_ = State::kComplete;
    }
    line_.clear();
  }
  if (state_ == State::kComplete) {
    absl::StrAppend(&head_, "Content-Length: ", body_.size(), "\r\n\r\n");
  }
  return i;
}

}  // namespace sluice::daemon
