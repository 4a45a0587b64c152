#include "tools/import_weights_lib.h"

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/testing/mkmodel.h"
#include "nlohmann/json.hpp"

namespace sluice::tools {
namespace {

using nlohmann::json;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::StatusOr<json> ReadJson(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  return j;
}

// j[key] as T; InvalidArgument naming the file and key when absent or of
// another type.
template <typename T>
absl::StatusOr<T> Field(const json& j, const char* key, const std::string& file) {
  const auto it = j.find(key);
  bool ok = it != j.end();
  if (ok) {
    if constexpr (std::is_same_v<T, json>) {
      ok = it->is_object() || it->is_array();
    } else if constexpr (std::is_same_v<T, std::string>) {
      ok = it->is_string();
    } else if constexpr (std::is_floating_point_v<T>) {
      ok = it->is_number();
    } else if constexpr (std::is_integral_v<T>) {
      ok = it->is_number_integer() && it->template get<int64_t>() >= 0;
    } else {
      ok = it->is_array();
    }
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": field \"", key, "\" is missing or of the wrong type"));
  }
  return it->template get<T>();
}

absl::StatusOr<mkmodel::ModelShape> ShapeOf(const json& config, const std::string& file) {
  ASSIGN_OR_RETURN(const std::string arch, Field<std::string>(config, "arch", file));
  if (arch != "qwen3moe") {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": config.arch \"", arch, "\": only qwen3moe is supported"));
  }
  mkmodel::ModelShape s;
  const std::pair<const char*, uint32_t*> ints[] = {
      {"n_embd", &s.n_embd},       {"n_layer", &s.n_layer},
      {"n_head", &s.n_head},       {"n_head_kv", &s.n_head_kv},
      {"head_dim", &s.head_dim},   {"n_expert", &s.n_expert},
      {"n_expert_used", &s.n_expert_used}, {"expert_ff", &s.expert_ff},
      {"context_length", &s.context_length},
  };
  for (const auto& [key, dst] : ints) {
    ASSIGN_OR_RETURN(*dst, Field<uint32_t>(config, key, file));
  }
  // qwen3moe files carry feed_forward_length; the routed experts are the
  // only FFN here.
  s.feed_forward = s.expert_ff;
  ASSIGN_OR_RETURN(s.rms_eps, Field<float>(config, "rms_eps", file));
  ASSIGN_OR_RETURN(s.rope_freq_base, Field<float>(config, "rope_freq_base", file));
  return s;
}

absl::StatusOr<mkmodel::Vocab> VocabOf(const json& t, const std::string& file) {
  ASSIGN_OR_RETURN(const std::string model, Field<std::string>(t, "model", file));
  ASSIGN_OR_RETURN(const std::string pre, Field<std::string>(t, "pre", file));
  if (model != "gpt2" || pre != "qwen2") {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": tokenizer \"", model, "\" / \"", pre, "\": only gpt2 / qwen2 is written"));
  }
  mkmodel::Vocab v;
  ASSIGN_OR_RETURN(v.tokens, Field<std::vector<std::string>>(t, "tokens", file));
  ASSIGN_OR_RETURN(v.token_types, Field<std::vector<int32_t>>(t, "token_types", file));
  ASSIGN_OR_RETURN(v.merges, Field<std::vector<std::string>>(t, "merges", file));
  ASSIGN_OR_RETURN(const uint32_t bos, Field<uint32_t>(t, "bos_token_id", file));
  ASSIGN_OR_RETURN(const uint32_t eos, Field<uint32_t>(t, "eos_token_id", file));
  // mkmodel's tokenizer keys name these ids (WriteModelWithValues checks
  // the rest of the layout).
  const size_t n = v.tokens.size();
  if (n < 3 || bos != n - 3 || eos != n - 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": bos_token_id ", bos, " / eos_token_id ", eos, " of ", n,
        " tokens: expected ", n - 3, " (<|endoftext|>) / ", n - 1, " (<|im_end|>)"));
  }
  return v;
}

struct TensorRef {
  std::vector<uint64_t> ne;
  uint64_t offset = 0;
  bool used = false;
};

using TensorRefs = std::map<std::string, TensorRef>;

absl::StatusOr<TensorRefs> TensorsOf(const json& m,
                                                          const std::string& file) {
  ASSIGN_OR_RETURN(const json list, Field<json>(m, "tensors", file));
  TensorRefs out;
  for (const json& t : list) {
    ASSIGN_OR_RETURN(const std::string name, Field<std::string>(t, "name", file));
    TensorRef ref;
    ASSIGN_OR_RETURN(ref.ne, Field<std::vector<uint64_t>>(t, "ne", file));
    ASSIGN_OR_RETURN(ref.offset, Field<uint64_t>(t, "offset", file));
    if (!out.emplace(name, ref).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": tensor ", name, " is listed twice"));
    }
  }
  return out;
}

std::string ShapeText(const std::vector<uint64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) absl::StrAppend(&s, i ? ", " : "", ne[i]);
  return s + "]";
}

}  // namespace

absl::Status ImportWeights(const ImportOptions& o) {
  const std::string manifest_path = o.export_dir + "/weights.json";
  const std::string data_path = o.export_dir + "/weights.bin";
  const std::string tokenizer_path = o.export_dir + "/tokenizer.json";
  ASSIGN_OR_RETURN(const json manifest, ReadJson(manifest_path));
  ASSIGN_OR_RETURN(const json config, Field<json>(manifest, "config", manifest_path));
  ASSIGN_OR_RETURN(const mkmodel::ModelShape shape, ShapeOf(config, manifest_path));
  ASSIGN_OR_RETURN(const json tok, ReadJson(tokenizer_path));
  ASSIGN_OR_RETURN(const mkmodel::Vocab vocab, VocabOf(tok, tokenizer_path));
  ASSIGN_OR_RETURN(TensorRefs tensors, TensorsOf(manifest, manifest_path));
  ASSIGN_OR_RETURN(const std::string data, ReadFile(data_path));

  mkmodel::Options options;
  options.arch = mkmodel::Arch::kQwen3Moe;
  options.shape = shape;
  options.type = o.type;
  options.name = o.name;
  const mkmodel::TensorValues values =
      [&](const std::string& name,
          const std::vector<uint64_t>& ne) -> absl::StatusOr<std::vector<float>> {
    const auto it = tensors.find(name);
    if (it == tensors.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(manifest_path, ": tensor ", name, " is missing"));
    }
    TensorRef& ref = it->second;
    if (ref.ne != ne) {
      return absl::InvalidArgumentError(absl::StrCat(
          manifest_path, ": tensor ", name, " has ne ", ShapeText(ref.ne),
          ", the model needs ", ShapeText(ne)));
    }
    uint64_t count = 1;
    for (uint64_t d : ne) count *= d;
    if (ref.offset % 4 != 0 || ref.offset > data.size() ||
        count > (data.size() - ref.offset) / 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          data_path, ": tensor ", name, " at offset ", ref.offset, " (", count,
          " floats) runs past the end (", data.size(), " bytes)"));
    }
    std::vector<float> v(count);
    std::memcpy(v.data(), data.data() + ref.offset, count * 4);  // little-endian host
    ref.used = true;
    return v;
  };
  RETURN_IF_ERROR(mkmodel::WriteModelWithValues(options, vocab, values, o.out_path));
  for (const auto& [name, ref] : tensors) {
    if (!ref.used) {
      return absl::InvalidArgumentError(absl::StrCat(
          manifest_path, ": tensor ", name, " is not part of the qwen3moe model"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::tools
