// Framing of the supervisor<->worker messages on a Unix stream socket.
//
// Each message is a 4-byte little-endian length followed by that many bytes
// of a serialized protobuf. File descriptors travel as SCM_RIGHTS ancillary
// data attached to the first byte of a message (the supervisor sends the
// shard fds with the Hello). See proto/sluice/worker/v1/worker.proto.
//
// Thread-safety: the functions hold no state. Callers serialize writers on one
// socket (a message must not interleave with another) and use one reader.
#ifndef SLUICE_WIRE_CHANNEL_H_
#define SLUICE_WIRE_CHANNEL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "google/protobuf/message_lite.h"

namespace sluice::wire {

// Larger frames are refused as a protocol error (a tensor table of a few
// thousand tensors is well below it).
inline constexpr uint32_t kMaxFrameBytes = 256u << 20;
// At most this many fds accompany one message.
inline constexpr int kMaxFdsPerMessage = 64;

// Writes one frame, retrying on EINTR and short writes. `fds` are
// duplicated into the receiver; the caller keeps its own. Errors:
// Unavailable when the peer has gone (EPIPE/ECONNRESET), Internal otherwise.
absl::Status SendFrame(int socket_fd, const google::protobuf::MessageLite& msg,
                       absl::Span<const int> fds = {});

// The pieces of SendFrame, for writers that serialize on one thread and write
// on another (wire/frame_writer.h): a whole frame (length prefix and body),
// and the blocking write of such a frame.
absl::StatusOr<std::string> EncodeFrame(const google::protobuf::MessageLite& msg);
absl::Status SendEncoded(int socket_fd, std::string_view frame,
                         absl::Span<const int> fds = {});

// Reads one frame into *msg. Received fds are appended to *fds (the caller
// owns and must close them); fds may be null, then any received fd is
// closed. Returns false on a clean end of stream before the first byte of a
// frame. Errors: DataLoss for a stream that ends inside a frame (the peer
// died mid-write); InvalidArgument for a frame over kMaxFrameBytes or one
// that does not parse (the peer broke the protocol); Unavailable when the
// peer reset the connection.
absl::StatusOr<bool> ReceiveFrame(int socket_fd,
                                  google::protobuf::MessageLite* msg,
                                  std::vector<int>* fds);

}  // namespace sluice::wire

#endif  // SLUICE_WIRE_CHANNEL_H_
