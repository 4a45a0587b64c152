#include "daemon/api_keys.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

TEST(Sha256Test, MatchesTheFipsVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the padding needs a second block.
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

class ApiKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string text = absl::StrCat("# sluiced keys\n", Sha256Hex("gen-key"),
                                          " generate\n\n", Sha256Hex("admin-key"),
                                          " admin  # the operator\n");
    auto k = ApiKeys::Parse(text, "keys");
    ASSERT_TRUE(k.ok()) << k.status();
    keys_ = *std::move(k);
  }
  ApiKeys keys_;
};

TEST_F(ApiKeysTest, KnownKeysPassForTheirRole) {
  EXPECT_TRUE(keys_.enabled());
  EXPECT_EQ(keys_.size(), 2u);
  EXPECT_TRUE(keys_.Check("Bearer gen-key", ApiKeys::Role::kGenerate).ok());
  EXPECT_TRUE(keys_.Check("bearer admin-key", ApiKeys::Role::kGenerate).ok());
  EXPECT_TRUE(keys_.Check("Bearer admin-key", ApiKeys::Role::kAdmin).ok());
}

TEST_F(ApiKeysTest, GenerateKeyIsDeniedAdminCalls) {
  const absl::Status s = keys_.Check("Bearer gen-key", ApiKeys::Role::kAdmin);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "this call needs an admin API key");
}

TEST_F(ApiKeysTest, MissingMalformedAndUnknownKeysAreUnauthenticated) {
  absl::Status s = keys_.Check("", ApiKeys::Role::kGenerate);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(s.message(), "an API key is required: send 'authorization: Bearer <key>'");
  s = keys_.Check("Basic Z2VuLWtleQ==", ApiKeys::Role::kGenerate);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(s.message(), "malformed authorization: expected 'Bearer <key>'");
  s = keys_.Check("Bearer not-a-key-of-ours", ApiKeys::Role::kGenerate);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(s.message(), "invalid API key");  // never the key itself
  EXPECT_EQ(keys_.Check("Bearer gen-key2", ApiKeys::Role::kGenerate).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(keys_.Check("gen-key", ApiKeys::Role::kGenerate).code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(ApiKeysParseTest, ErrorsNameTheLine) {
  EXPECT_EQ(ApiKeys::Parse("abc generate\n", "f").status().message(),
            "f:1: the key hash must be 64 hex digits (SHA-256)");
  EXPECT_EQ(ApiKeys::Parse(absl::StrCat("\n", std::string(64, 'g'), " admin"), "f")
                .status()
                .message(),
            "f:2: the key hash must be 64 hex digits (SHA-256)");
  EXPECT_EQ(ApiKeys::Parse(absl::StrCat(std::string(64, 'a'), " root"), "f").status().message(),
            "f:1: role 'root': expected generate or admin");
  EXPECT_EQ(ApiKeys::Parse(std::string(64, 'a'), "f").status().message(),
            "f:1: expected '<sha256 hex> <generate|admin>'");
  EXPECT_EQ(ApiKeys::Parse("# nothing\n\n", "f").status().message(), "f: holds no key");
}

TEST(ApiKeysParseTest, LoadFileReadsAFileAndNamesAMissingOne) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/keys";
  std::ofstream(path) << Sha256Hex("k") << " admin\n";
  auto keys = ApiKeys::LoadFile(path);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_TRUE(keys->Check("Bearer k", ApiKeys::Role::kAdmin).ok());
  EXPECT_EQ(ApiKeys::LoadFile("/nonexistent/keys").status().message(),
            "--api_keys_file='/nonexistent/keys': cannot open the file");
}

TEST(ApiKeysParseTest, DefaultIsDisabledAndAllowsAll) {
  ApiKeys none;
  EXPECT_FALSE(none.enabled());
  EXPECT_TRUE(none.Check("", ApiKeys::Role::kAdmin).ok());
}

}  // namespace
}  // namespace sluice::daemon
