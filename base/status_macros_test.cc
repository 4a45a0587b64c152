#include "base/status_macros.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace sluice {
namespace {

absl::Status FailIf(bool fail) {
  return fail ? absl::InvalidArgumentError("bad") : absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(int v) {
  if (v < 0) return absl::OutOfRangeError("negative");
  return std::make_unique<int>(v);
}

absl::Status Chain(bool fail) {
  RETURN_IF_ERROR(FailIf(fail));
  return absl::OkStatus();
}

absl::StatusOr<int> Twice(int v) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> p, MakeInt(v));
  ASSIGN_OR_RETURN(auto q, MakeInt(v));
  return *p + *q;
}

TEST(StatusMacrosTest, ReturnIfErrorPropagates) {
  EXPECT_TRUE(Chain(false).ok());
  absl::Status s = Chain(true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad");
}

TEST(StatusMacrosTest, AssignOrReturnMovesValueAndPropagatesError) {
  EXPECT_EQ(*Twice(21), 42);
  absl::StatusOr<int> r = Twice(-1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(r.status().message(), "negative");
}

}  // namespace
}  // namespace sluice
