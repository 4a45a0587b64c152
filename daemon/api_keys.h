// API keys for the public front ends (gRPC, HTTP): who may call what.
//
// The keys file (--api_keys_file) holds one key per line: the SHA-256 of the
// key in hex (64 digits), a space, and its role, `generate` or `admin`; '#'
// starts a comment, blank lines are ignored. Only hashes are stored, so the
// file does not grant access if read. Clients send the key itself as
// `authorization: Bearer <key>`.
//
// Roles: `generate` may call the serving RPCs (Generate, Tokenize,
// ListModels, GetMetrics); `admin` may call everything, including LoadModel
// and UnloadModel.
//
// A presented key is hashed and compared with every stored hash in constant
// time (no early exit, no data-dependent branch), so timing reveals neither
// which key nor how much of one matched. Messages never echo the key.
//
// Thread-safety: immutable after LoadFile(); Check() may be called
// concurrently. A default-constructed ApiKeys is disabled: Check() allows all.
#ifndef SLUICE_DAEMON_API_KEYS_H_
#define SLUICE_DAEMON_API_KEYS_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice::daemon {

class ApiKeys {
 public:
  enum class Role { kGenerate, kAdmin };

  // InvalidArgument naming the file and line for a malformed line, an
  // unreadable file, or a file without any key.
  static absl::StatusOr<ApiKeys> LoadFile(const std::string& path);
  // The same from the file's text (`name` is used in messages).
  static absl::StatusOr<ApiKeys> Parse(std::string_view text, const std::string& name);

  ApiKeys() = default;

  bool enabled() const { return !keys_.empty(); }

  // `authorization_value` is the value of the `authorization` header or
  // metadata ("Bearer <key>"; empty when absent). OK when keys are disabled,
  // or the key is known and its role covers `needed`. Otherwise
  // Unauthenticated (missing, malformed or unknown key) or PermissionDenied
  // (a generate key for an admin call).
  absl::Status Check(std::string_view authorization_value, Role needed) const;

  size_t size() const { return keys_.size(); }

 private:
  using Digest = std::array<uint8_t, 32>;
  struct Key {
    Digest sha256;
    Role role;
  };
  std::vector<Key> keys_;
};

// SHA-256 of `data` (FIPS 180-4; libcrypto computes it), exposed for tests
// and tools.
std::array<uint8_t, 32> Sha256(std::string_view data);
// Lower-case hex of a digest.
std::string Sha256Hex(std::string_view data);

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_API_KEYS_H_
