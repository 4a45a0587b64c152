#include "daemon/testing/tiny_model.h"

#include "loader/testing/gguf_bytes.h"

namespace sluice::daemon::testing {

std::string WriteTinyModel() {
  const std::string path = sluice::testing::MakeTempDir() + "/tiny.gguf";
  sluice::testing::WriteFileOrDie(
      path, sluice::testing::GgufBytes()
                .Header(3, /*n_tensors=*/1, /*n_kv=*/1)
                .Kv("general.architecture", GgufValue::String("qwen35moe"))
                .TensorInfo("output_norm.weight", {32}, /*F32*/ 0, 0)
                .PadTo(32)
                .Zeros(128)
                .bytes());
  return path;
}

}  // namespace sluice::daemon::testing
