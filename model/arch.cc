#include "model/arch.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "loader/model_files.h"

namespace sluice {

absl::Span<const ArchEntry> ArchRegistry() {
  static constexpr ArchEntry kEntries[] = {
      {"qwen3moe", DescribeQwen3Moe},
      {"qwen35moe", DescribeQwen35Moe},
      {"deepseek2", DescribeDeepseek2},
  };
  return kEntries;
}

std::vector<BlockStateShape> ArchDesc::StateShapes() const {
  std::vector<BlockStateShape> shapes(layers.size());
  for (size_t il = 0; il < layers.size(); ++il) {
    BlockStateShape& s = shapes[il];
    if (layers[il].mixer == MixerKind::kDeltaNet) {
      s.conv_kernel = ssm.conv_kernel;
      s.conv_channels = ssm.conv_channels();
      s.v_heads = ssm.n_v_heads;
      s.state_size = ssm.state_size;
    } else if (layers[il].mixer == MixerKind::kLatentAttention) {
      s.kv_dim = mla.cache_width();
      s.latent = true;
    } else {
      s.kv_dim = attn.n_head_kv * attn.head_dim;
    }
  }
  return shapes;
}

absl::Status BindRoutingSource(RoutingSource* source, const ArchDesc& d) {
  if (source == nullptr) return absl::OkStatus();
  std::vector<int64_t> moe_layers;
  for (size_t il = 0; il < d.layers.size(); ++il) {
    if (d.layers[il].ffn == FfnKind::kMoe) moe_layers.push_back(static_cast<int64_t>(il));
  }
  return source->Bind(static_cast<int64_t>(d.layers.size()), d.moe.n_expert,
                      d.moe.n_expert_used, moe_layers);
}

absl::StatusOr<ArchDesc> DescribeModel(const ModelFiles& files) {
  ASSIGN_OR_RETURN(const std::string arch,
                   files.metadata().GetString("general.architecture"));
  std::vector<std::string> names;
  for (const ArchEntry& e : ArchRegistry()) {
    if (arch == e.name) return e.describe(files);
    names.push_back(e.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      files.shard(0).path, ": general.architecture = \"", arch,
      "\" is not supported (supported: ", absl::StrJoin(names, ", "), ")"));
}

}  // namespace sluice
