#include "loader/tensor_table.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace sluice {

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string_view TensorKindName(TensorKind kind) {
  return kind == TensorKind::kRoutedExpert ? "expert" : "dense";
}

bool IsRoutedExpertName(std::string_view name) {
  return EndsWith(name, "_exps.weight") || EndsWith(name, "_exps.bias") ||
         EndsWith(name, "_exps.scale");
}

uint64_t TensorEntry::row_bytes() const {
  const GgmlTypeTraits& t = TraitsOf(type);
  return ne[0] / t.block_size * t.bytes_per_block;
}

absl::StatusOr<TensorTable> TensorTable::Build(
    std::string model_name, const std::vector<ShardView>& shards) {
  TensorTable table;
  table.model_name_ = std::move(model_name);
  std::unordered_map<std::string, uint32_t> shard_of;
  for (uint32_t s = 0; s < shards.size(); ++s) {
    const GgufFile& file = *shards[s].file;
    for (const TensorInfo& info : file.tensors()) {
      auto [it, inserted] = shard_of.emplace(info.name, s);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            file.file_name(), ": tensor '", info.name, "' is also in shard ",
            it->second + 1, " (", shards[it->second].file->file_name(),
            "); tensor names must be unique across shards"));
      }
      TensorEntry e;
      e.name = info.name;
      e.type = info.type;
      e.n_dims = info.n_dims;
      e.ne = info.ne;
      e.shard = s;
      // GgufFile::Parse checked data_offset + offset + n_bytes <= file size.
      e.file_offset = file.data_offset() + info.offset;
      e.n_bytes = info.n_bytes;
      if (shards[s].base != nullptr) e.data = shards[s].base + e.file_offset;
      if (IsRoutedExpertName(e.name)) {
        e.kind = TensorKind::kRoutedExpert;
        e.n_experts = e.ne[e.n_dims - 1];
        e.expert_slice_bytes = e.n_bytes / e.n_experts;  // ne[] >= 1, exact
        table.expert_bytes_ += e.n_bytes;
      } else {
        table.dense_bytes_ += e.n_bytes;
      }
      table.index_.emplace(e.name, table.entries_.size());
      table.entries_.push_back(std::move(e));
    }
  }
  return table;
}

const TensorEntry* TensorTable::Find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

absl::StatusOr<const TensorEntry*> TensorTable::Require(
    std::string_view name) const {
  const TensorEntry* e = Find(name);
  if (e == nullptr) {
    return absl::NotFoundError(absl::StrCat("model ", model_name_, ": tensor '",
                                            std::string(name), "' not found"));
  }
  return e;
}

}  // namespace sluice
