// libFuzzer target for the GGUF parser (built outside Bazel by fuzz/run.sh;
// the corpus replay test builds the same entry point under Bazel).
//
// Whatever the bytes, Parse must return a status without crashing, and on
// success every tensor's byte range must lie inside the input: the target
// reads the first and last byte of each through the tensor table, so an
// out-of-bounds range trips AddressSanitizer.
#include <cstddef>
#include <cstdint>
#include <string>

#include "loader/gguf_file.h"
#include "loader/tensor_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = sluice::GgufFile::Parse("fuzz.gguf", data, size);
  if (!file.ok()) {
    // Messages are built from file contents; make sure they are usable.
    volatile size_t n = file.status().message().size();
    (void)n;
    return 0;
  }
  const sluice::GgufFile& f = **file;
  size_t sink = 0;
  for (const sluice::GgufKv& kv : f.metadata()) {
    sink += kv.value.DebugString(4).size();
    sink += f.GetU64(kv.key).ok() + f.GetString(kv.key).ok() + f.GetF32(kv.key).ok();
    sink += f.GetArrayI32(kv.key).ok() + f.GetArrayString(kv.key).ok();
  }
  auto table = sluice::TensorTable::Build("fuzz", {{&f, data}});
  if (table.ok()) {
    for (const sluice::TensorEntry& e : table->entries()) {
      sink += e.data[0] + e.data[e.n_bytes - 1];
      if (e.kind == sluice::TensorKind::kRoutedExpert) {
        sink += e.expert_data(e.n_experts - 1)[e.expert_slice_bytes - 1];
      }
    }
  }
  volatile size_t keep = sink;
  (void)keep;
  return 0;
}
