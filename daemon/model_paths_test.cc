#include "daemon/model_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

class ModelPathPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(getenv("TEST_TMPDIR")) + "/models";
    mkdir(dir_.c_str(), 0755);
    std::ofstream(dir_ + "/ok.gguf") << "GGUF";
    unlink((dir_ + "/fifo.gguf").c_str());
    ASSERT_EQ(mkfifo((dir_ + "/fifo.gguf").c_str(), 0644), 0);
    unlink((dir_ + "/escape.gguf").c_str());
    ASSERT_EQ(symlink("/etc/passwd", (dir_ + "/escape.gguf").c_str()), 0);
    auto p = ModelPathPolicy::Create({dir_});
    ASSERT_TRUE(p.ok()) << p.status();
    policy_ = std::make_unique<ModelPathPolicy>(*std::move(p));
  }
  std::string dir_;
  std::unique_ptr<ModelPathPolicy> policy_;
};

TEST_F(ModelPathPolicyTest, AcceptsARegularFileInside) {
  EXPECT_TRUE(policy_->Check(dir_ + "/ok.gguf").ok());
  EXPECT_TRUE(policy_->Check(dir_ + "/./sub/../ok.gguf").ok());
  // Missing inside: the loader reports it.
  EXPECT_TRUE(policy_->Check(dir_ + "/missing.gguf").ok());
}

TEST_F(ModelPathPolicyTest, RefusesEverythingOutsideAlike) {
  const absl::Status shadow = policy_->Check("/etc/shadow");
  EXPECT_EQ(shadow.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(shadow.message(),
            "LoadModel path='/etc/shadow': not a model file inside a --model_dir");
  // A missing file outside gets the same answer: existence does not leak.
  EXPECT_EQ(policy_->Check("/nonexistent/x.gguf").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(policy_->Check(dir_ + "/../models-evil/x.gguf").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(policy_->Check(dir_ + "/../../../etc/passwd").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(policy_->Check(dir_ + "/escape.gguf").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(policy_->Check(dir_).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(policy_->Check("relative.gguf").code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(ModelPathPolicyTest, RefusesAFifoWithoutOpeningIt) {
  const absl::Status s = policy_->Check(dir_ + "/fifo.gguf");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "LoadModel path='" + QuotePrefix(dir_ + "/fifo.gguf") + "': not a regular file");
}

TEST_F(ModelPathPolicyTest, RefusesNulBytesAndLongPaths) {
  const absl::Status nul = policy_->Check(dir_ + std::string("/ok.gguf\0/x", 11));
  EXPECT_EQ(nul.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(nul.message(), "LoadModel: path contains a NUL byte");
  const absl::Status longer = policy_->Check(std::string(5000, 'a'));
  EXPECT_EQ(longer.message(), "LoadModel: path of 5000 bytes exceeds 4096");
}

TEST(ModelPathPolicyNoDirsTest, RefusesEveryLoad) {
  auto p = ModelPathPolicy::Create({});
  ASSERT_TRUE(p.ok());
  const absl::Status s = p->Check("/tmp/x.gguf");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "LoadModel: no --model_dir is configured, so models cannot be loaded over the API");
}

TEST(ModelPathPolicyNoDirsTest, CreateRefusesMissingDirectoriesAndTheRoot) {
  EXPECT_EQ(ModelPathPolicy::Create({"/nonexistent-dir"}).status().message(),
            "--model_dir='/nonexistent-dir': not an existing directory");
  EXPECT_EQ(ModelPathPolicy::Create({"/"}).status().message(),
            "--model_dir='/': would allow every file");
}

TEST(QuotePrefixTest, CutsLongTextAndKeepsUtf8Whole) {
  EXPECT_EQ(QuotePrefix("short"), "short");
  EXPECT_EQ(QuotePrefix(std::string(1 << 20, 'x'), 4), "xxxx... (1048576 bytes)");
  EXPECT_EQ(QuotePrefix("ab\xc3\xa9zz", 3), "ab... (6 bytes)");
}

}  // namespace
}  // namespace sluice::daemon
