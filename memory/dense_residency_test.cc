#include "memory/dense_residency.h"

#include <cstdlib>
#include <cstring>
#include <numeric>

#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "loader/testing/gguf_bytes.h"
#include "memory/testing/fake_platform.h"

namespace sluice::memory {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// A host region standing in for the read-only mapping: 256-aligned start,
// filled with a byte pattern so copies can be checked.
class HostRegion {
 public:
  explicit HostRegion(uint64_t bytes)
      : data_(static_cast<uint8_t*>(std::aligned_alloc(kDeviceAlignment, AlignUp(bytes)))) {
    for (uint64_t i = 0; i < bytes; ++i) data_[i] = static_cast<uint8_t>(i * 7 + 3);
  }
  ~HostRegion() { std::free(data_); }
  const uint8_t* at(uint64_t offset) const { return data_ + offset; }

 private:
  uint8_t* data_;
};

// An owned buffer whose data starts `misalign` bytes past a 256-byte boundary.
std::shared_ptr<const void> OwnedBuffer(uint64_t bytes, uint64_t misalign,
                                        const void** data) {
  auto* base = static_cast<uint8_t*>(std::aligned_alloc(kDeviceAlignment, AlignUp(bytes + misalign)));
  for (uint64_t i = 0; i < bytes; ++i) base[misalign + i] = static_cast<uint8_t>(0xA0 + i);
  *data = base + misalign;
  return std::shared_ptr<const void>(base, [](const void* p) { std::free(const_cast<void*>(p)); });
}

bool SameBytes(const void* a, const void* b, uint64_t n) { return std::memcmp(a, b, n) == 0; }

TEST(DenseResidencyTest, AlignmentIsPinnedAt256Bytes) {
  // cuBLASLt's default minimum alignment; the aliasing rule and every device
  // offset depend on it.
  static_assert(kDeviceAlignment == 256);
  EXPECT_EQ(kDeviceAlignment, 256u);
  EXPECT_EQ(AlignUp(1), 256u);
  EXPECT_EQ(AlignUp(256), 256u);
  EXPECT_EQ(AlignUp(257), 512u);
}

TEST(DenseResidencyTest, DiscreteCopiesEachTensorOnceIntoOneAlignedAllocation) {
  FakePlatform platform(FakePlatform::Discrete(kGiB));
  HostRegion mapping(4096);
  const void* owned_data = nullptr;
  std::shared_ptr<const void> owned = OwnedBuffer(100, 0, &owned_data);
  std::weak_ptr<const void> owned_watch = owned;
  std::vector<DenseTensor> tensors = {
      {"aligned", mapping.at(0), 1000, nullptr},
      {"misaligned", mapping.at(1030), 300, nullptr},
      {"owned", owned_data, 100, std::move(owned)},
  };
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  auto r = DenseResidency::Place(platform, std::move(tensors), [&](uint64_t done, uint64_t total) {
    progress.push_back({done, total});
  });
  ASSERT_TRUE(r.ok()) << r.status();
  // One report per tensor, in placement order, against the whole.
  EXPECT_EQ(progress, (std::vector<std::pair<uint64_t, uint64_t>>{
                          {1000, 1400}, {1300, 1400}, {1400, 1400}}));

  const FakePlatformCalls calls = platform.calls();
  EXPECT_EQ(calls.alloc, 1);
  EXPECT_EQ(calls.copy_to_device, 3);
  EXPECT_EQ(calls.bytes_copied, 1400u);
  EXPECT_EQ(calls.register_host, 0);  // no pinning of the mapping
  EXPECT_EQ(platform.live_allocations(), 1);
  // 1000 -> 1024, 300 -> 512, 100 -> 256.
  EXPECT_EQ(platform.live_bytes(), 1792u);

  const ResidencyCounters& c = (*r)->counters();
  EXPECT_EQ(c.tensors, 3u);
  EXPECT_EQ(c.bytes_copied, 1400u);
  EXPECT_EQ(c.bytes_aliased + c.bytes_rehomed + c.bytes_staged, 0u);
  EXPECT_EQ(c.device_bytes_owned, 1792u);
  EXPECT_EQ(c.host_bytes_owned, 0u);

  const DensePlacement* a = (*r)->Find("aligned");
  const DensePlacement* m = (*r)->Find("misaligned");
  const DensePlacement* o = (*r)->Find("owned");
  ASSERT_TRUE(a && m && o);
  for (const DensePlacement* p : {a, m, o}) {
    EXPECT_EQ(p->kind, PlacementKind::kCopied) << p->name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p->device) % kDeviceAlignment, 0u) << p->name;
  }
  EXPECT_EQ(static_cast<char*>(m->device) - static_cast<char*>(a->device), 1024);
  EXPECT_EQ(static_cast<char*>(o->device) - static_cast<char*>(a->device), 1536);
  EXPECT_TRUE(SameBytes(a->device, mapping.at(0), 1000));
  EXPECT_TRUE(SameBytes(m->device, mapping.at(1030), 300));
  // The owned host buffer is gone: the device copy is the only one.
  EXPECT_TRUE(owned_watch.expired());
  uint8_t expect_owned[100];
  for (int i = 0; i < 100; ++i) expect_owned[i] = static_cast<uint8_t>(0xA0 + i);
  EXPECT_TRUE(SameBytes(o->device, expect_owned, 100));

  r->reset();
  EXPECT_EQ(platform.live_allocations(), 0);
  EXPECT_EQ(platform.calls().bad_free, 0);
}

TEST(DenseResidencyTest, HmmCapableDiscretePartStillCopies) {
  PlatformFacts facts = FakePlatform::Discrete(kGiB);
  facts.pageable_memory_access = true;  // e.g. HMM, but separate memory
  FakePlatform platform(facts);
  HostRegion mapping(512);
  auto r = DenseResidency::Place(platform, {{"w", mapping.at(0), 512, nullptr}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->Find("w")->kind, PlacementKind::kCopied);
  EXPECT_NE((*r)->Find("w")->device, static_cast<const void*>(mapping.at(0)));
}

TEST(DenseResidencyTest, UnifiedAliasesAlignedBytesWithoutCopying) {
  FakePlatform platform(FakePlatform::Unified(kGiB));
  HostRegion mapping(2048);
  const void* owned_data = nullptr;
  std::shared_ptr<const void> owned = OwnedBuffer(64, 0, &owned_data);
  std::weak_ptr<const void> owned_watch = owned;
  auto r = DenseResidency::Place(platform, {{"borrowed", mapping.at(512), 700, nullptr},
                                            {"owned", owned_data, 64, std::move(owned)}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->Find("borrowed")->kind, PlacementKind::kAliased);
  EXPECT_EQ((*r)->Find("borrowed")->device, static_cast<const void*>(mapping.at(512)));
  EXPECT_EQ((*r)->Find("owned")->kind, PlacementKind::kAliased);
  EXPECT_EQ((*r)->Find("owned")->device, owned_data);
  EXPECT_FALSE(owned_watch.expired());  // aliased in place: kept alive
  EXPECT_EQ(platform.calls().alloc, 0);
  EXPECT_EQ(platform.calls().copy_to_device, 0);
  EXPECT_EQ((*r)->counters().bytes_aliased, 764u);
  EXPECT_EQ((*r)->counters().device_bytes_owned, 0u);
  r->reset();
  EXPECT_TRUE(owned_watch.expired());
}

TEST(DenseResidencyTest, UnifiedRehomesAnOwnedMisalignedBufferOnce) {
  FakePlatform platform(FakePlatform::Unified(kGiB));
  const void* owned_data = nullptr;
  std::shared_ptr<const void> owned = OwnedBuffer(300, 40, &owned_data);
  std::weak_ptr<const void> owned_watch = owned;
  uint8_t expect[300];
  std::memcpy(expect, owned_data, 300);
  auto r = DenseResidency::Place(platform, {{"norm", owned_data, 300, std::move(owned)}});
  ASSERT_TRUE(r.ok()) << r.status();
  const DensePlacement* p = (*r)->Find("norm");
  EXPECT_EQ(p->kind, PlacementKind::kRehomed);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p->device) % kDeviceAlignment, 0u);
  EXPECT_TRUE(SameBytes(p->device, expect, 300));
  EXPECT_TRUE(owned_watch.expired());  // moved, not duplicated
  EXPECT_EQ(platform.calls().alloc, 0);  // host block, not device memory
  EXPECT_EQ((*r)->counters().bytes_rehomed, 300u);
  EXPECT_EQ((*r)->counters().host_bytes_owned, 512u);
  EXPECT_EQ((*r)->counters().bytes_aliased, 0u);
}

TEST(DenseResidencyTest, UnifiedStagesABorrowedMisalignedRangeToTheDevice) {
  FakePlatform platform(FakePlatform::Unified(kGiB));
  HostRegion mapping(4096);
  auto r = DenseResidency::Place(platform, {{"aligned", mapping.at(0), 256, nullptr},
                                            {"odd", mapping.at(256 + 32), 1000, nullptr}});
  ASSERT_TRUE(r.ok()) << r.status();
  const DensePlacement* odd = (*r)->Find("odd");
  EXPECT_EQ(odd->kind, PlacementKind::kStaged);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(odd->device) % kDeviceAlignment, 0u);
  EXPECT_TRUE(SameBytes(odd->device, mapping.at(288), 1000));
  EXPECT_EQ((*r)->Find("aligned")->kind, PlacementKind::kAliased);
  const ResidencyCounters& c = (*r)->counters();
  EXPECT_EQ(c.bytes_staged, 1000u);
  EXPECT_EQ(c.bytes_aliased, 256u);
  EXPECT_EQ(c.bytes_copied, 0u);
  EXPECT_EQ(c.host_bytes_owned, 0u);  // never copied into anonymous memory
  EXPECT_EQ(c.device_bytes_owned, 1024u);
  EXPECT_EQ(platform.calls().alloc, 1);
  EXPECT_EQ(platform.calls().bytes_copied, 1000u);
}

TEST(DenseResidencyTest, AllocationFailureIsResourceExhaustedWithNumbersAndLeaksNothing) {
  FakePlatform platform(FakePlatform::Discrete(1000));
  HostRegion mapping(2048);
  const void* owned_data = nullptr;
  std::shared_ptr<const void> owned = OwnedBuffer(64, 0, &owned_data);
  std::weak_ptr<const void> owned_watch = owned;
  auto r = DenseResidency::Place(platform, {{"a", mapping.at(0), 700, nullptr},
                                            {"b", owned_data, 64, std::move(owned)}});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(r.status().message().find(
                "dense residency: 2 tensors need 1024 bytes on fake discrete GPU (1000 of 1000 "
                "bytes free)"),
            std::string::npos)
      << r.status();
  EXPECT_EQ(platform.live_allocations(), 0);
  EXPECT_EQ(platform.calls().copy_to_device, 0);
  EXPECT_TRUE(owned_watch.expired());

  // A failure the platform reports whatever the size is passed on the same way.
  FakePlatform roomy(FakePlatform::Discrete(kGiB));
  roomy.FailNextAllocs(1);
  auto again = DenseResidency::Place(roomy, {{"a", mapping.at(0), 700, nullptr}});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(roomy.live_allocations(), 0);
}

TEST(DenseResidencyTest, LookupMapsInteriorPointersAndRejectsOthers) {
  FakePlatform platform(FakePlatform::Discrete(kGiB));
  HostRegion mapping(4096);
  auto r = DenseResidency::Place(platform, {{"a", mapping.at(0), 1000, nullptr},
                                            {"b", mapping.at(2048), 100, nullptr}});
  ASSERT_TRUE(r.ok()) << r.status();
  const char* a_dev = static_cast<const char*>((*r)->Find("a")->device);
  const char* b_dev = static_cast<const char*>((*r)->Find("b")->device);
  EXPECT_EQ(*(*r)->DevicePointer(mapping.at(0)), a_dev);
  EXPECT_EQ(*(*r)->DevicePointer(mapping.at(999)), a_dev + 999);
  EXPECT_EQ(*(*r)->DevicePointer(mapping.at(2048 + 50)), b_dev + 50);
  for (uint64_t outside : {1000u, 1500u, 2047u, 2148u}) {
    auto miss = (*r)->DevicePointer(mapping.at(outside));
    EXPECT_EQ(miss.status().code(), absl::StatusCode::kNotFound) << outside;
    EXPECT_NE(miss.status().message().find("is not inside any of the 2 placed tensors"),
              std::string::npos)
        << miss.status();
  }
  EXPECT_EQ((*r)->Find("c"), nullptr);
}

TEST(DenseResidencyTest, BadInputIsInvalidArgumentNamingTheTensor) {
  FakePlatform platform(FakePlatform::Discrete(kGiB));
  HostRegion mapping(1024);
  auto overlap = DenseResidency::Place(
      platform, {{"a", mapping.at(0), 600, nullptr}, {"b", mapping.at(512), 100, nullptr}});
  EXPECT_EQ(overlap.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(overlap.status().message().find("tensor 'b' overlaps 'a'"), std::string::npos)
      << overlap.status();
  auto empty = DenseResidency::Place(platform, {{"z", mapping.at(0), 0, nullptr}});
  EXPECT_NE(empty.status().message().find("tensor 'z' has 0 bytes"), std::string::npos);
  auto null = DenseResidency::Place(platform, {{"n", nullptr, 8, nullptr}});
  EXPECT_NE(null.status().message().find("tensor 'n' has no host pointer"), std::string::npos);
  EXPECT_EQ(platform.calls().alloc, 0);
}

// A mapped GGUF: the dense tensors are listed borrowed from the mapping (the
// routed-expert tensor is not), and placing them on a discrete part copies
// exactly their bytes.
TEST(DenseResidencyTest, DenseTensorsOfAMappedModelAreBorrowedFromTheMapping) {
  const std::string path = sluice::testing::MakeTempDir() + "/m.gguf";
  std::string file = sluice::testing::GgufBytes()
                         .Header(3, /*n_tensors=*/3, /*n_kv=*/0)
                         .TensorInfo("token_embd.weight", {64, 2}, /*F32*/ 0, 0)
                         .TensorInfo("blk.0.ffn_up_exps.weight", {32, 4, 2}, 0, 512)
                         .TensorInfo("blk.0.attn_norm.weight", {64}, 0, 1536)
                         .PadTo(32)
                         .bytes();
  for (int i = 0; i < 1792; ++i) file.push_back(static_cast<char>(i % 251));
  sluice::testing::WriteFileOrDie(path, file);
  auto files = ModelFiles::Open(path);
  ASSERT_TRUE(files.ok()) << files.status();
  auto dense = DenseTensorsOf((*files)->tensors());
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_EQ(dense->size(), 2u);
  EXPECT_EQ((*dense)[0].name, "token_embd.weight");
  EXPECT_EQ((*dense)[0].bytes, 512u);
  EXPECT_EQ((*dense)[1].name, "blk.0.attn_norm.weight");
  EXPECT_EQ((*dense)[1].bytes, 256u);
  EXPECT_EQ((*dense)[1].host, (*files)->tensors().entries()[2].data);
  EXPECT_EQ((*dense)[0].owner, nullptr);

  FakePlatform platform(FakePlatform::Discrete(kGiB));
  auto r = DenseResidency::Place(platform, *std::move(dense));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->counters().bytes_copied, 768u);
  const DensePlacement* norm = (*r)->Find("blk.0.attn_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_TRUE(SameBytes(norm->device, (*files)->tensors().entries()[2].data, 256));
}

TEST(DenseResidencyTest, KindNames) {
  EXPECT_EQ(PlacementKindName(PlacementKind::kCopied), "copied");
  EXPECT_EQ(PlacementKindName(PlacementKind::kAliased), "aliased");
  EXPECT_EQ(PlacementKindName(PlacementKind::kRehomed), "rehomed");
  EXPECT_EQ(PlacementKindName(PlacementKind::kStaged), "staged");
}

}  // namespace
}  // namespace sluice::memory
