// Incremental HTTP/1.1 request framing for the HTTP front (http_front.h):
// bytes in, one complete request out, before any handler thread sees it.
//
// Why: cpp-httplib reads a request on its handler thread with a timeout per
// read and a body limit that chunked bodies bypass, so slow or huge
// requests held threads and memory. RequestFraming reads the request line
// and headers, then the body (Content-Length or chunked), refusing as early
// as the bytes allow:
//   * headers over `max_header_bytes` (431), a request line or header
//     without ':' (400);
//   * a Content-Length over `max_body_bytes` before the body is read, a
//     chunked body as soon as its decoded size passes it (413);
//   * both Content-Length and Transfer-Encoding, a transfer coding other
//     than chunked, a bad chunk size (400 / 501).
// A complete request is re-framed for cpp-httplib: the same request line and
// headers without Transfer-Encoding, Content-Length and Expect, then
// "Content-Length: N" and the decoded body. Bytes after the request (a
// pipelined next request) are left unconsumed.
//
// Thread-safety: none; one per connection, used by one thread at a time.
#ifndef SLUICE_DAEMON_HTTP_FRAMING_H_
#define SLUICE_DAEMON_HTTP_FRAMING_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace sluice::daemon {

struct FramingLimits {
  size_t max_header_bytes = 64 << 10;
  size_t max_body_bytes = 8 << 20;
};

class RequestFraming {
 public:
  enum class State { kHeaders, kBody, kComplete, kRefused };

  explicit RequestFraming(FramingLimits limits) : limits_(limits) {}

  // Consumes a prefix of `data`; returns how many bytes it used. Stops at the
  // end of a request (state() kComplete) or at a refusal (kRefused).
  size_t Consume(absl::string_view data);

  State state() const { return state_; }
  bool started() const { return state_ != State::kHeaders || !raw_head_.empty(); }
  // After the headers: the request asked for "Expect: 100-continue" and has
  // a body still to come.
  bool expects_continue() const { return expect_continue_ && state_ == State::kBody; }
  bool http10() const { return http10_; }
  absl::string_view method() const { return method_; }
  // The body bytes decoded so far, and (from the headers on) the declared
  // Content-Length, or 0 for chunked.
  size_t body_bytes() const { return body_.size(); }
  size_t declared_length() const { return declared_length_; }

  // kRefused: the HTTP status (400, 413, 431, 501) and why.
  int refusal_status() const { return refusal_status_; }
  const std::string& refusal() const { return refusal_; }

  // kComplete: the re-framed request (head then body).
  const std::string& head() const { return head_; }
  const std::string& body() const { return body_; }

 private:
  enum class Chunk { kSize, kData, kDataEnd, kTrailer };
  size_t ConsumeHead(absl::string_view data);
  size_t ConsumeChunked(absl::string_view data);
  bool ParseHead();
  bool Refuse(int status, std::string why);
  bool GrowBody(size_t more);

  const FramingLimits limits_;
  State state_ = State::kHeaders;
  std::string raw_head_;
  std::string head_;
  std::string body_;
  std::string line_;  // a chunk-size or trailer line being read
  std::string method_;
  bool chunked_ = false;
  bool expect_continue_ = false;
  bool http10_ = false;
  size_t declared_length_ = 0;
  size_t chunk_left_ = 0;
  size_t trailer_bytes_ = 0;
  Chunk chunk_ = Chunk::kSize;
  int refusal_status_ = 0;
  std::string refusal_;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_HTTP_FRAMING_H_
