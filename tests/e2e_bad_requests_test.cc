// End-to-end: a matrix of bad requests, each answered with a precise code and
// message, after which the daemon serves a normal request with the same
// tokens as before. Covers issue 11 defects 7 (limits checked before
// queueing, messages quoting a short prefix) and 8 (malformed protobuf and
// invalid UTF-8 are INVALID_ARGUMENT, not INTERNAL).
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

using C = grpc::StatusCode;

struct Case {
  std::string name;
  std::function<grpc::Status()> call;
  C code;
  std::string message;  // a part of the expected message
};

// Sends `bytes` as the request of `method`, bypassing serialization.
grpc::Status RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     const std::string& bytes) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  grpc::CompletionQueue cq;
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

class E2eBadRequestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("e2e-bad");
    auto path = WriteMicroModel(dir_);
    ASSERT_TRUE(path.ok()) << path.status();
    model_ = *path;
    DaemonOptions options;
    options.model_path = model_;
    auto d = Daemon::Start(options);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    channel_ = grpc::CreateCustomChannel(daemon_->address(), grpc::InsecureChannelCredentials(),
                                         args);
    stub_ = v1::Sluice::NewStub(channel_);
  }

  grpc::Status Generate(const v1::GenerateRequest& r) {
    return RunGenerate(*stub_, r, absl::Seconds(30)).status;
  }
  grpc::Status Tokenize(const v1::TokenizeRequest& r) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::TokenizeResponse resp;
    return stub_->Tokenize(&ctx, r, &resp);
  }
  grpc::Status Load(const v1::LoadModelRequest& r) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::LoadModelResponse resp;
    return stub_->LoadModel(&ctx, r, &resp);
  }
  grpc::Status Unload(const std::string& model_id) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::UnloadModelRequest r;
    r.set_model_id(model_id);
    v1::UnloadModelResponse resp;
    return stub_->UnloadModel(&ctx, r, &resp);
  }

  std::string dir_, model_;
  std::unique_ptr<Daemon> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Sluice::Stub> stub_;
};

v1::GenerateRequest P(const std::string& prompt) {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.set_max_tokens(2);
  return r;
}
v1::GenerateRequest Sampling(std::function<void(v1::SamplingParams*)> set) {
  v1::GenerateRequest r = P("x");
  set(r.mutable_sampling());
  return r;
}
v1::GenerateRequest Ids(std::vector<int32_t> ids) {
  v1::GenerateRequest r;
  for (int32_t id : ids) r.mutable_token_ids()->add_ids(id);
  r.set_max_tokens(2);
  return r;
}
v1::GenerateRequest Chat(std::vector<std::pair<std::string, std::string>> messages) {
  v1::GenerateRequest r;
  for (auto& [role, content] : messages) {
    auto* m = r.mutable_chat()->add_messages();
    m->set_role(role);
    m->set_content(content);
  }
  r.set_max_tokens(2);
  return r;
}
v1::LoadModelRequest L(const std::string& path) {
  v1::LoadModelRequest r;
  r.set_path(path);
  return r;
}

TEST_F(E2eBadRequestsTest, EveryBadRequestGetsItsCodeAndMessageAndServingGoesOn) {
  const Generation before = RunGenerate(*stub_, GreedyRequest("the same tokens", 6));
  ASSERT_TRUE(before.status.ok()) << before.status.error_message();
  const uint32_t vocab = [&] {
    grpc::ClientContext ctx;
    v1::ListModelsResponse r;
    (void)stub_->ListModels(&ctx, v1::ListModelsRequest(), &r);
    return r.models(0).vocab_size();
  }();
  const std::string v = absl::StrCat(vocab);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::string mib(1 << 20, 'm');
  ASSERT_EQ(mkfifo((dir_ + "/fifo.gguf").c_str(), 0644), 0);
  std::ofstream(dir_ + "/text.gguf") << "not a model at all";
  const std::string samp = "GenerateRequest.sampling: sampler: ";

  std::vector<Case> cases = {
      {"no input", [&] { return Generate(v1::GenerateRequest()); }, C::INVALID_ARGUMENT,
       "GenerateRequest.input: set one of prompt, token_ids or chat"},
      {"unknown model", [&] { auto r = P("x"); r.set_model_id("nope"); return Generate(r); },
       C::NOT_FOUND, "model_id 'nope' is not loaded (loaded: 'micro-qwen35moe')"},
      {"1 MiB model id", [&] { auto r = P("x"); r.set_model_id(mib); return Generate(r); },
       C::INVALID_ARGUMENT, "mmmm... (1048576 bytes)': longer than 256 bytes"},
      {"257-byte model id",
       [&] { auto r = P("x"); r.set_model_id(std::string(257, 'q')); return Generate(r); },
       C::INVALID_ARGUMENT, "... (257 bytes)': longer than 256 bytes"},
      {"prompt over 1 MiB", [&] { return Generate(P(std::string((1 << 20) + 1, 'a'))); },
       C::INVALID_ARGUMENT, "GenerateRequest.prompt: 1048577 bytes exceed the limit of 1048576"},
      {"empty prompt", [&] { return Generate(P("")); }, C::INVALID_ARGUMENT,
       "GenerateRequest: the prompt has no tokens"},
      {"prompt longer than the context", [&] { return Generate(P(std::string(4000, 'z'))); },
       C::INVALID_ARGUMENT, "tokens; the context holds 512"},
      {"temperature -1", [&] { return Generate(Sampling([](auto* s) { s->set_temperature(-1); })); },
       C::INVALID_ARGUMENT, samp + "temperature = -1 is outside [0, inf)"},
      {"temperature NaN", [&] { return Generate(Sampling([&](auto* s) { s->set_temperature(nan); })); },
       C::INVALID_ARGUMENT, samp + "temperature = nan is outside [0, inf)"},
      {"temperature inf", [&] { return Generate(Sampling([&](auto* s) { s->set_temperature(inf); })); },
       C::INVALID_ARGUMENT, samp + "temperature = inf is outside [0, inf)"},
      {"temperature -inf", [&] { return Generate(Sampling([&](auto* s) { s->set_temperature(-inf); })); },
       C::INVALID_ARGUMENT, samp + "temperature = -inf is outside [0, inf)"},
      {"top_p 0", [&] { return Generate(Sampling([](auto* s) { s->set_top_p(0); })); },
       C::INVALID_ARGUMENT, samp + "top_p = 0 is outside (0, 1]"},
      {"top_p -0.5", [&] { return Generate(Sampling([](auto* s) { s->set_top_p(-0.5f); })); },
       C::INVALID_ARGUMENT, samp + "top_p = -0.5 is outside (0, 1]"},
      {"top_p 1.5", [&] { return Generate(Sampling([](auto* s) { s->set_top_p(1.5f); })); },
       C::INVALID_ARGUMENT, samp + "top_p = 1.5 is outside (0, 1]"},
      {"top_p NaN", [&] { return Generate(Sampling([&](auto* s) { s->set_top_p(nan); })); },
       C::INVALID_ARGUMENT, samp + "top_p = nan is outside (0, 1]"},
      {"min_p -0.25", [&] { return Generate(Sampling([](auto* s) { s->set_min_p(-0.25f); })); },
       C::INVALID_ARGUMENT, samp + "min_p = -0.25 is outside [0, 1]"},
      {"min_p 2", [&] { return Generate(Sampling([](auto* s) { s->set_min_p(2); })); },
       C::INVALID_ARGUMENT, samp + "min_p = 2 is outside [0, 1]"},
      {"min_p NaN", [&] { return Generate(Sampling([&](auto* s) { s->set_min_p(nan); })); },
       C::INVALID_ARGUMENT, samp + "min_p = nan is outside [0, 1]"},
      {"repetition_penalty 0",
       [&] { return Generate(Sampling([](auto* s) { s->set_repetition_penalty(0); })); },
       C::INVALID_ARGUMENT, samp + "repetition_penalty = 0 is outside (0, inf)"},
      {"repetition_penalty -1",
       [&] { return Generate(Sampling([](auto* s) { s->set_repetition_penalty(-1); })); },
       C::INVALID_ARGUMENT, samp + "repetition_penalty = -1 is outside (0, inf)"},
      {"repetition_penalty inf",
       [&] { return Generate(Sampling([&](auto* s) { s->set_repetition_penalty(inf); })); },
       C::INVALID_ARGUMENT, samp + "repetition_penalty = inf is outside (0, inf)"},
      {"repetition_penalty NaN",
       [&] { return Generate(Sampling([&](auto* s) { s->set_repetition_penalty(nan); })); },
       C::INVALID_ARGUMENT, samp + "repetition_penalty = nan is outside (0, inf)"},
      {"top_k 2^31", [&] { return Generate(Sampling([](auto* s) { s->set_top_k(1u << 31); })); },
       C::INVALID_ARGUMENT, "GenerateRequest.sampling.top_k=2147483648: too large"},
      {"repetition_window 2^21",
       [&] { return Generate(Sampling([](auto* s) { s->set_repetition_window(1u << 21); })); },
       C::INVALID_ARGUMENT, "GenerateRequest.sampling.repetition_window=2097152: too large"},
      {"token id -1", [&] { return Generate(Ids({-1})); }, C::INVALID_ARGUMENT,
       "GenerateRequest.token_ids.ids[0]=-1: outside the vocabulary [0, " + v + ")"},
      {"token id = vocab", [&] { return Generate(Ids({1, static_cast<int32_t>(vocab)})); },
       C::INVALID_ARGUMENT,
       "GenerateRequest.token_ids.ids[1]=" + v + ": outside the vocabulary [0, " + v + ")"},
      {"token id 2^31-1", [&] { return Generate(Ids({0, 1, 2147483647})); }, C::INVALID_ARGUMENT,
       "GenerateRequest.token_ids.ids[2]=2147483647: outside the vocabulary"},
      {"no token ids", [&] { v1::GenerateRequest r; r.mutable_token_ids(); return Generate(r); },
       C::INVALID_ARGUMENT, "GenerateRequest: the prompt has no tokens"},
      {"token ids fill the context", [&] { return Generate(Ids(std::vector<int32_t>(512, 1))); },
       C::INVALID_ARGUMENT, "GenerateRequest: the prompt has 512 tokens; the context holds 512"},
      {"17 stop strings",
       [&] { auto r = P("x"); for (int i = 0; i < 17; ++i) r.add_stop("s"); return Generate(r); },
       C::INVALID_ARGUMENT, "GenerateRequest.stop: 17 strings exceed the limit of 16"},
      {"257-byte stop string",
       [&] { auto r = P("x"); r.add_stop("a"); r.add_stop(std::string(257, 's')); return Generate(r); },
       C::INVALID_ARGUMENT, "GenerateRequest.stop[1]: 257 bytes exceed the limit of 256"},
      {"chat role robot", [&] { return Generate(Chat({{"robot", "hi"}})); }, C::INVALID_ARGUMENT,
       "GenerateRequest.chat: chat message 0: role \"robot\" is not one of"},
      {"chat 1 MiB role", [&] { return Generate(Chat({{"user", "a"}, {mib, "hi"}})); },
       C::INVALID_ARGUMENT, "chat message 1: role \"" + std::string(32, 'm') + "... (1048576 bytes)\""},
      {"chat control-character role", [&] { return Generate(Chat({{"us\ter", "hi"}})); },
       C::INVALID_ARGUMENT, "role \"us\\ter\" is not one of"},
      {"chat 1025 messages",
       [&] { return Generate(Chat(std::vector<std::pair<std::string, std::string>>(1025, {"user", "a"}))); },
       C::INVALID_ARGUMENT, "GenerateRequest.chat: 1025 messages exceed the limit of 1024"},
      {"chat contents over 1 MiB",
       [&] { return Generate(Chat({{"user", std::string(600000, 'a')}, {"user", std::string(600000, 'b')}})); },
       C::INVALID_ARGUMENT,
       "GenerateRequest.chat: the message contents: 1200000 bytes exceed the limit of 1048576"},
      {"tokenize unknown model",
       [&] { v1::TokenizeRequest r; r.set_model_id("nope"); return Tokenize(r); }, C::NOT_FOUND,
       "model_id 'nope' is not loaded"},
      {"tokenize 1 MiB model id",
       [&] { v1::TokenizeRequest r; r.set_model_id(mib); return Tokenize(r); }, C::INVALID_ARGUMENT,
       "TokenizeRequest.model_id='" + std::string(64, 'm') + "... (1048576 bytes)'"},
      {"tokenize text over 1 MiB",
       [&] { v1::TokenizeRequest r; r.set_text(std::string(3 << 20, 't')); return Tokenize(r); },
       C::INVALID_ARGUMENT, "TokenizeRequest.text: 3145728 bytes exceed the limit of 1048576"},
      {"load /etc/shadow", [&] { return Load(L("/etc/shadow")); }, C::PERMISSION_DENIED,
       "LoadModel path='/etc/shadow': not a model file inside a --model_dir"},
      {"load /proc/self/environ", [&] { return Load(L("/proc/self/environ")); },
       C::PERMISSION_DENIED, "not a model file inside a --model_dir"},
      {"load a NUL byte", [&] { return Load(L(std::string("/tmp/x\0.gguf", 11))); },
       C::INVALID_ARGUMENT, "LoadModel: path contains a NUL byte"},
      {"load an empty path", [&] { return Load(L("")); }, C::INVALID_ARGUMENT,
       "LoadModel: path is empty"},
      {"load a 5000-byte path", [&] { return Load(L("/" + std::string(4999, 'p'))); },
       C::INVALID_ARGUMENT, "LoadModel: path of 5000 bytes exceeds 4096"},
      {"load a relative path", [&] { return Load(L("micro-qwen35moe.gguf")); },
       C::PERMISSION_DENIED, "not a model file inside a --model_dir"},
      {"load escaping with ..", [&] { return Load(L(dir_ + "/../../../../../../etc/passwd")); },
       C::PERMISSION_DENIED, "not a model file inside a --model_dir"},
      {"load a FIFO", [&] { return Load(L(dir_ + "/fifo.gguf")); }, C::INVALID_ARGUMENT,
       "': not a regular file"},
      {"load a text file", [&] { return Load(L(dir_ + "/text.gguf")); }, C::INVALID_ARGUMENT,
       "header magic: expected 'GGUF': not a GGUF file"},
      {"load a missing file", [&] { return Load(L(dir_ + "/missing.gguf")); },
       C::INVALID_ARGUMENT, "missing.gguf: cannot open"},
      {"load a directory", [&] { return Load(L(dir_)); }, C::INVALID_ARGUMENT,
       "': not a regular file"},
      {"load with a 300-byte model id",
       [&] { auto r = L(model_); r.set_model_id(std::string(300, 'i')); return Load(r); },
       C::INVALID_ARGUMENT, "LoadModel: model_id of 300 bytes exceeds 256"},
      {"load with 5000 threads", [&] { auto r = L(model_); r.set_threads(5000); return Load(r); },
       C::INVALID_ARGUMENT, "LoadModel: threads=5000: must be in 1..1024"},
      {"load with context 8", [&] { auto r = L(model_); r.set_context_length(8); return Load(r); },
       C::INVALID_ARGUMENT, "LoadModel: context_length=8: must be in 16..1048576"},
      {"load with worker kind 99",
       [&] { auto r = L(model_); r.set_worker_kind(static_cast<v1::WorkerKind>(99)); return Load(r); },
       C::INVALID_ARGUMENT, "LoadModel: worker_kind=99 is unknown"},
      {"unload unknown model", [&] { return Unload("nope"); }, C::NOT_FOUND,
       "UnloadModel: model_id 'nope' is not loaded (loaded: 'micro-qwen35moe')"},
      {"unload 1 MiB model id", [&] { return Unload(mib); }, C::NOT_FOUND,
       "UnloadModel: model_id '" + std::string(64, 'm') + "... (1048576 bytes)' is not loaded"},
      {"Generate: garbage bytes",
       [&] { return RawCall(channel_, "/sluice.v1.Sluice/Generate", "\xff\xff\xff\xff"); },
       C::INVALID_ARGUMENT, "the request to /sluice.v1.Sluice/Generate does not parse"},
      {"Generate: invalid UTF-8 prompt",
       [&] { return RawCall(channel_, "/sluice.v1.Sluice/Generate", "\x12\x02\xc3\x28"); },
       C::INVALID_ARGUMENT, "string field that is not valid UTF-8"},
      {"Generate: truncated length",
       [&] { return RawCall(channel_, "/sluice.v1.Sluice/Generate", "\x12\x7f" "abc"); },
       C::INVALID_ARGUMENT, "/sluice.v1.Sluice/Generate does not parse"},
      {"Tokenize: invalid UTF-8 text",
       [&] { return RawCall(channel_, "/sluice.v1.Sluice/Tokenize", "\x12\x01\xff"); },
       C::INVALID_ARGUMENT, "/sluice.v1.Sluice/Tokenize does not parse"},
      {"Tokenize: truncated varint",
       [&] { return RawCall(channel_, "/sluice.v1.Sluice/Tokenize", "\x18\xff"); },
       C::INVALID_ARGUMENT, "/sluice.v1.Sluice/Tokenize does not parse"},
      {"LoadModel: invalid UTF-8 path",
       [&] { return RawCall(channel_, "/sluice.v1.Sluice/LoadModel", "\x0a\x03/\xfe/"); },
       C::INVALID_ARGUMENT, "/sluice.v1.Sluice/LoadModel does not parse"},
      {"UnloadModel: invalid UTF-8 id",
       [&] { return RawCall(channel_, "/sluice.v1.Sluice/UnloadModel", "\x0a\x01\x80"); },
       C::INVALID_ARGUMENT, "/sluice.v1.Sluice/UnloadModel does not parse"},
      {"ListModels: garbage",
       [&] { return RawCall(channel_, "/sluice.v1.Sluice/ListModels", "\x0a\xff"); },
       C::INVALID_ARGUMENT, "/sluice.v1.Sluice/ListModels does not parse"},
      {"GetMetrics: bad wire type",
       [&] { return RawCall(channel_, "/sluice.v1.Sluice/GetMetrics", "\x0f"); },
       C::INVALID_ARGUMENT, "/sluice.v1.Sluice/GetMetrics does not parse"},
      {"unknown method",
       [&] { return RawCall(channel_, "/sluice.v1.Sluice/Explode", ""); }, C::UNIMPLEMENTED, ""},
  };
  ASSERT_GE(cases.size(), 60u);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const absl::Time start = absl::Now();
    const grpc::Status s = c.call();
    EXPECT_EQ(s.error_code(), c.code) << s.error_message();
    EXPECT_NE(s.error_message().find(c.message), std::string::npos) << s.error_message();
    EXPECT_LT(s.error_message().size(), 512u);
    EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  }
  const Generation after = RunGenerate(*stub_, GreedyRequest("the same tokens", 6));
  ASSERT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_EQ(after.token_ids, before.token_ids);
  EXPECT_EQ(daemon_->Health(), "SERVING");
  EXPECT_EQ(daemon_->Stop(), 0) << daemon_->Log();
}

// Limits are checked before queueing: a bad request is refused at once even
// while a long generation runs (it used to wait behind it).
TEST_F(E2eBadRequestsTest, BadRequestIsRefusedWithoutWaitingForTheRunningOne) {
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, GreedyRequest("a long one", 400));
  v1::GenerateResponse resp;
  ASSERT_TRUE(reader->Read(&resp));
  const absl::Time start = absl::Now();
  const grpc::Status s = Generate(Sampling([](auto* p) { p->set_temperature(-2); }));
  EXPECT_EQ(s.error_code(), C::INVALID_ARGUMENT);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  ctx.TryCancel();
  while (reader->Read(&resp)) {
  }
  (void)reader->Finish();
}

}  // namespace
}  // namespace sluice::testing
