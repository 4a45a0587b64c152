#include "tools/inspect_lib.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice::inspect {

namespace {

std::string Dims(const TensorEntry& e) {
  std::string s = "[";
  for (uint32_t d = 0; d < e.n_dims; ++d) absl::StrAppend(&s, d ? ", " : "", e.ne[d]);
  return s + "]";
}

void DumpMetadata(const GgufFile& f, int max_elements, std::ostream& out) {
  out << "  metadata (" << f.metadata().size() << " keys):\n";
  for (const GgufKv& kv : f.metadata()) {
    std::string type(GgufTypeName(kv.value.type()));
    if (kv.value.is_array()) {
      type = absl::StrCat("ARRAY<", std::string(GgufTypeName(kv.value.element_type())),
                          ">[", kv.value.array_size(), "]");
    }
    out << "    " << kv.key << ": " << type << " = "
        << kv.value.DebugString(static_cast<uint64_t>(max_elements)) << "\n";
  }
}

}  // namespace

std::string SummaryLine(const ModelFiles& files) {
  const TensorTable& t = files.tensors();
  return absl::StrCat("tensors=", t.size(), " bytes=", t.total_bytes(),
                      " dense_bytes=", t.dense_bytes(), " expert_bytes=", t.expert_bytes(),
                      " shards=", files.shard_count());
}

void Dump(const ModelFiles& files, bool summary_only, int max_array_elements,
          std::ostream& out) {
  for (int i = 0; i < files.shard_count(); ++i) {
    const ShardInfo& s = files.shard(i);
    out << absl::StrFormat("shard %d/%d: %s (%d bytes, GGUF v%d, alignment %d, data at %d, "
                           "%d tensors)\n",
                           i + 1, files.shard_count(), s.path, s.size, s.file->version(),
                           s.file->alignment(), s.file->data_offset(),
                           s.file->tensors().size());
    if (!summary_only) DumpMetadata(*s.file, max_array_elements, out);
  }
  if (!summary_only) {
    const TensorTable& t = files.tensors();
    out << "tensors (" << t.size() << "):\n";
    out << absl::StrFormat("  %5s %5s %12s %-8s %-22s %12s %-6s %s\n", "#", "shard",
                           "offset", "type", "ne", "bytes", "kind", "name");
    for (size_t i = 0; i < t.entries().size(); ++i) {
      const TensorEntry& e = t.entries()[i];
      std::string kind(TensorKindName(e.kind));
      if (e.kind == TensorKind::kRoutedExpert) {
        absl::StrAppend(&kind, " x", e.n_experts, " of ", e.expert_slice_bytes, " B");
      }
      out << absl::StrFormat("  %5d %5d %12d %-8s %-22s %12d %-6s %s\n", i, e.shard + 1,
                             e.file_offset, std::string(TraitsOf(e.type).name), Dims(e),
                             e.n_bytes, kind, e.name);
    }
  }
  out << SummaryLine(files) << "\n";
}

}  // namespace sluice::inspect
