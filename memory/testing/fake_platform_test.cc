#include "memory/testing/fake_platform.h"

#include <cstring>

#include "gtest/gtest.h"

namespace sluice::memory {
namespace {

TEST(FakePlatformTest, TracksAllocationsCopiesAndCapacity) {
  FakePlatform p(FakePlatform::Discrete(4096));
  auto a = p.Alloc(1000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % 256, 0u);
  EXPECT_EQ(p.Probe()->free_bytes, 3096u);
  const char text[] = "weights";
  ASSERT_TRUE(p.CopyToDevice(static_cast<char*>(*a) + 10, text, sizeof(text)).ok());
  EXPECT_STREQ(static_cast<char*>(*a) + 10, "weights");
  // A copy that runs past the allocation is refused, not performed.
  EXPECT_EQ(p.CopyToDevice(static_cast<char*>(*a) + 995, text, sizeof(text)).code(),
            absl::StatusCode::kInvalidArgument);
  auto big = p.Alloc(3097);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("cannot allocate 3097 bytes (3096 of 4096 free)"),
            std::string::npos)
      << big.status();
  p.FailNextAllocs(1);
  EXPECT_FALSE(p.Alloc(1).ok());
  EXPECT_TRUE(p.Alloc(1).ok());
  p.Free(*a);
  p.Free(*a);
  const FakePlatformCalls c = p.calls();
  EXPECT_EQ(c.alloc, 4);
  EXPECT_EQ(c.free, 2);
  EXPECT_EQ(c.bad_free, 1);
  EXPECT_EQ(c.copy_to_device, 2);
  EXPECT_EQ(c.bytes_copied, sizeof(text));
  EXPECT_EQ(p.live_allocations(), 1);
}

TEST(FakePlatformTest, RegistrationFollowsTheFacts) {
  PlatformFacts facts = FakePlatform::Discrete(0);
  facts.host_register_read_only_supported = false;
  FakePlatform p(facts);
  char buf[64];
  EXPECT_EQ(p.RegisterHost(buf, 64, /*read_only=*/true).code(), absl::StatusCode::kUnimplemented);
  ASSERT_TRUE(p.RegisterHost(buf, 64, /*read_only=*/false).ok());
  EXPECT_EQ(*p.DevicePointerOf(buf + 8), buf + 8);
  ASSERT_TRUE(p.UnregisterHost(buf).ok());
  EXPECT_FALSE(p.DevicePointerOf(buf).ok());
  EXPECT_FALSE(p.UnregisterHost(buf).ok());
  EXPECT_EQ(p.calls().register_host, 2);
  EXPECT_EQ(p.calls().unregister_host, 2);
  EXPECT_EQ(p.calls().device_pointer_of, 2);
}

}  // namespace
}  // namespace sluice::memory
