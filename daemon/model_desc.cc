#include "daemon/model_desc.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "config/expert_config_proto.h"
#include "daemon/request_limits.h"

namespace sluice::daemon {

std::string DefaultModelId(const std::string& path) {
  std::string stem = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  if (std::optional<SplitName> split = ParseSplitName(stem)) stem = split->prefix;
  if (absl::EndsWith(stem, ".gguf")) stem.resize(stem.size() - 5);
  return stem.empty() ? "model" : stem;
}

namespace {

// The loader's finding in full for the operator's log; without the file's
// contents for the client (docs/API.md: errors never carry its bytes).
absl::Status FileError(const std::string& path, const absl::Status& found) {
  std::cerr << "sluiced: LoadModel path='" << path << "': " << found.message() << std::endl;
  return absl::InvalidArgumentError(absl::StrCat("LoadModel path='", path, "': ",
                                                 WithoutFileContent(std::string(found.message()))));
}

}  // namespace

absl::StatusOr<ModelDesc> PrepareLoad(const v1::LoadModelRequest& request,
                                        const LoadSettings& defaults) {
  if (request.path().empty()) {
    return absl::InvalidArgumentError("LoadModel: path is empty");
  }
  if (request.model_id().size() > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LoadModel: model_id of ", request.model_id().size(), " bytes exceeds 256"));
  }
  if (request.worker_kind() != v1::WORKER_KIND_CPU &&
      request.worker_kind() != v1::WORKER_KIND_CUDA &&
      request.worker_kind() != v1::WORKER_KIND_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoadModel: worker_kind=", request.worker_kind(), " is unknown"));
  }
  // Whether this host can run a CUDA worker is the worker's to find out: the
  // supervisor never touches CUDA.
  const v1::WorkerKind kind = request.worker_kind() == v1::WORKER_KIND_UNSPECIFIED
                                  ? defaults.kind
                                  : request.worker_kind();
  const uint32_t threads = request.threads() != 0 ? request.threads() : defaults.threads;
  const uint32_t context =
      request.context_length() != 0 ? request.context_length() : defaults.context_length;
  if (threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoadModel: threads=", threads, ": must be in 1..1024"));
  }
  if (context < 16 || context > (1u << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LoadModel: context_length=", context, ": must be in 16..1048576"));
  }
  if (defaults.batch.kv_cache_tokens != 0 && defaults.batch.kv_cache_tokens < context) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LoadModel: context_length=", context, " is longer than the KV pool (--kv_cache_tokens=",
        defaults.batch.kv_cache_tokens, ")"));
  }
  absl::StatusOr<std::unique_ptr<ModelFiles>> files =
      ModelFiles::Open(request.path(), defaults.check_opened);
  if (files.status().code() == absl::StatusCode::kPermissionDenied) return files.status();
  if (!files.ok()) return FileError(request.path(), files.status());
  const GgufFile& meta = (*files)->metadata();
  absl::StatusOr<std::string> arch = meta.GetString("general.architecture");
  if (!arch.ok()) return FileError(request.path(), arch.status());
  ModelDesc d;
  const TensorTable& table = (*files)->tensors();
  v1::ModelInfo& info = d.info;
  info.set_model_id(request.model_id().empty() ? DefaultModelId(request.path())
                                               : request.model_id());
  info.set_path(request.path());
  info.set_architecture(*arch);
  info.set_worker_kind(kind);
  info.set_shard_count((*files)->shard_count());
  info.set_tensor_bytes(table.total_bytes());
  info.set_dense_bytes(table.dense_bytes());
  info.set_expert_bytes(table.expert_bytes());
  info.set_context_length(context);
  if (const GgufValue* tokens = meta.Find("tokenizer.ggml.tokens");
      tokens != nullptr && tokens->is_array()) {
    info.set_vocab_size(static_cast<uint32_t>(tokens->array_size()));
  }

  worker::v1::WorkerConfig* config = d.hello.mutable_config();
  config->set_model_id(info.model_id());
  config->set_kind(kind);
  if (kind == v1::WORKER_KIND_CUDA) config->set_device(static_cast<uint32_t>(defaults.device));
  config->set_threads(threads);
  config->set_context_length(context);
  config->set_max_sequences(static_cast<uint32_t>(std::max(1, defaults.batch.max_sequences)));
  config->set_kv_cache_tokens(
      static_cast<uint64_t>(std::max<int64_t>(0, defaults.batch.kv_cache_tokens)));
  config->set_prefill_pacing(defaults.batch.prefill_pacing);
  if (kind == v1::WORKER_KIND_CUDA) {
    config::ToWorkerConfig(defaults.experts, config);
  }
  // Any backend counts a profile (a CPU worker's warms a later CUDA one).
  config->set_expert_profile(defaults.experts.profile);
  // Every kind gets it: a CPU worker skips, a CUDA worker refuses a nonzero
  // one by name.
  config->set_expert_skip(defaults.experts.skip_threshold);
  for (int i = 0; i < (*files)->shard_count(); ++i) {
    worker::v1::ShardDesc* s = d.hello.add_shards();
    s->set_name((*files)->shard(i).path);
    s->set_size_bytes((*files)->shard(i).size);
    s->set_index(i);
  }
  for (const TensorEntry& e : table.entries()) {
    worker::v1::TensorDesc* t = d.hello.add_tensors();
    t->set_name(e.name);
    t->set_ggml_type(static_cast<uint32_t>(e.type));
    for (uint32_t k = 0; k < e.n_dims; ++k) t->add_ne(e.ne[k]);
    t->set_shard(e.shard);
    t->set_file_offset(e.file_offset);
    t->set_n_bytes(e.n_bytes);
    t->set_routed_expert(e.kind == TensorKind::kRoutedExpert);
  }
  d.files = std::move(*files);
  return d;
}

}  // namespace sluice::daemon
