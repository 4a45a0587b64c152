// import_weights: a trained model's raw export to a qwen3moe GGUF.
//
//   bazel run //tools:import_weights -- --export out/demo-train
//       --out models/demo-qwen3moe-q8_0.gguf [--type q8_0|f32] [--name NAME]
//
// The export format and the checks are in tools/import_weights_lib.h.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "tools/import_weights_lib.h"

ABSL_FLAG(std::string, export, "", "directory written by train/train_demo.py");
ABSL_FLAG(std::string, out, "", "GGUF file to write");
ABSL_FLAG(std::string, type, "q8_0", "weight matrices' type: q8_0 or f32");
ABSL_FLAG(std::string, name, "sluice-demo-qwen3moe", "general.name");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  sluice::tools::ImportOptions o;
  o.export_dir = absl::GetFlag(FLAGS_export);
  o.out_path = absl::GetFlag(FLAGS_out);
  o.name = absl::GetFlag(FLAGS_name);
  const std::string type = absl::GetFlag(FLAGS_type);
  if (o.export_dir.empty() || o.out_path.empty() || (type != "q8_0" && type != "f32")) {
    std::fprintf(stderr, "usage: import_weights --export DIR --out FILE.gguf [--type q8_0|f32]\n");
    return 2;
  }
  o.type = type == "f32" ? sluice::GgmlType::kF32 : sluice::GgmlType::kQ8_0;
  const absl::Status st = sluice::tools::ImportWeights(o);
  if (!st.ok()) {
    std::fprintf(stderr, "import_weights: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::printf("%s\n", o.out_path.c_str());
  return 0;
}
