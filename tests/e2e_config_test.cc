// End-to-end: sluiced's configuration (flags and config file) and its exit
// status: clear errors and a non-zero exit for every fatal problem, 0 after
// a clean SIGTERM.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

CommandResult Sluiced(std::vector<std::string> flags) {
  flags.insert(flags.begin(), {RunfilePath("daemon/sluiced"),
                               "--worker_binary=" + RunfilePath("worker/sluice-worker"),
                               "--grpc_address=127.0.0.1:0", "--metrics_address=none"});
  return RunCommand(flags, {}, "/dev/null", absl::Seconds(60));
}

TEST(E2eConfigTest, BadFlagsExitTwoNamingTheFlag) {
  CommandResult r = Sluiced({"--threads=0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad configuration: --threads=0: must be in 1..1024"), std::string::npos)
      << r.err;
  r = Sluiced({"--worker_memory_limit=lots"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--worker_memory_limit='lots'"), std::string::npos) << r.err;
  r = Sluiced({"--worker_kind=tpu"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--worker_kind='tpu'"), std::string::npos) << r.err;
  r = Sluiced({"--backend=tpu"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--backend='tpu': expected cpu or cuda"), std::string::npos) << r.err;
  r = Sluiced({"--worker_binary=/nonexistent/sluice-worker"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no executable sluice-worker at /nonexistent/sluice-worker"),
            std::string::npos)
      << r.err;
}

// --worker_kind was renamed --backend; configs that say worker_kind keep
// working, and sluiced says once in its log what to write instead.
TEST(E2eConfigTest, TheOldWorkerKindKeyStillWorksWithADeprecationLine) {
  const std::string dir = MakeTempDir("e2e-config-alias");
  const std::string conf = dir + "/sluiced.conf";
  std::ofstream(conf) << "worker_kind = cuda\nthreads = 0\n";
  CommandResult r = Sluiced({"--config=" + conf});
  EXPECT_EQ(r.exit_code, 2);  // threads = 0 stops it before any worker starts
  EXPECT_NE(r.err.find("sluiced: --worker_kind is deprecated; use --backend (same meaning)\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--threads=0: must be in 1..1024"), std::string::npos) << r.err;
}

TEST(E2eConfigTest, BadConfigFileNamesFileAndLine) {
  const std::string dir = MakeTempDir("e2e-config");
  const std::string conf = dir + "/sluiced.conf";
  std::ofstream(conf) << "# sluiced\nthreads = 2\nthreadz = 3\n";
  CommandResult r = Sluiced({"--config=" + conf});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(conf + ":3: unknown key 'threadz'"), std::string::npos) << r.err;
}

TEST(E2eConfigTest, ShippedExampleConfigStarts) {
  DaemonOptions options;
  options.flags = {"--config=" + RunfilePath("deploy/sluiced.conf")};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->Health(), "NOT_SERVING");  // the example loads no model
  EXPECT_GT((*d)->http_port(), 0);  // its http_address, moved to a free port
  EXPECT_EQ((*d)->Stop(), 0);
}

TEST(E2eConfigTest, CorruptModelAtStartIsFatal) {
  const std::string dir = MakeTempDir("e2e-config");
  const std::string bad = dir + "/bad.gguf";
  std::ofstream(bad) << "GGUF but not really";
  CommandResult r = Sluiced({"--model=" + bad});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(absl::StrCat("fatal: --model: LoadModel path='", bad, "'")),
            std::string::npos)
      << r.err;
}

// Valid files whose worker cannot start: exiting would only have systemd
// restart sluiced into the same failure, so it stays up, NOT_SERVING, with
// the model FAILED and the cause in last_error.
TEST(E2eConfigTest, WorkerThatCannotStartLeavesTheDaemonUpNotServing) {
  const std::string dir = MakeTempDir("e2e-config");
  auto model = WriteMicroModel(dir);
  ASSERT_TRUE(model.ok());
  DaemonOptions options;
  options.model_path = *model;
  options.flags = {"--worker_binary=/bin/false"};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->Health(), "NOT_SERVING");
  grpc::ClientContext ctx;
  v1::ListModelsResponse resp;
  ASSERT_TRUE((*d)->stub().ListModels(&ctx, v1::ListModelsRequest(), &resp).ok());
  ASSERT_EQ(resp.models_size(), 1);
  EXPECT_EQ(resp.models(0).state(), v1::MODEL_STATE_FAILED);
  EXPECT_NE(resp.models(0).last_error().find("exited with code 1 while loading the model"),
            std::string::npos)
      << resp.models(0).last_error();
  const std::string log = (*d)->Log();
  EXPECT_NE(log.find("failed to start: LoadModel path='"), std::string::npos) << log;
  EXPECT_EQ((*d)->Stop(), 0);
}

TEST(E2eConfigTest, PortInUseIsFatal) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  CommandResult r = Sluiced({absl::StrCat("--grpc_address=127.0.0.1:", port)});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(absl::StrCat("fatal: cannot listen on --grpc_address=127.0.0.1:", port)),
            std::string::npos)
      << r.err;
  close(fd);
}

TEST(E2eConfigTest, ConfigFileStartsTheDaemonAndFlagsOverrideIt) {
  const std::string dir = MakeTempDir("e2e-config");
  auto model = WriteMicroModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string conf = dir + "/sluiced.conf";
  std::ofstream(conf) << "model = " << *model << "\nmodel_id = from-file\n"
                      << "context_length = 64\nqueue_limit = 3\n";
  DaemonOptions options;
  options.context_length = 128;  // the command line wins over the file's 64
  options.flags = {"--config=" + conf};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  grpc::ClientContext ctx;
  v1::ListModelsResponse resp;
  ASSERT_TRUE((*d)->stub().ListModels(&ctx, v1::ListModelsRequest(), &resp).ok());
  ASSERT_EQ(resp.models_size(), 1);
  EXPECT_EQ(resp.models(0).model_id(), "from-file");
  EXPECT_EQ(resp.models(0).context_length(), 128u);
  EXPECT_EQ((*d)->Health(), "SERVING");

  // Loading again replaces the model; the new one serves.
  grpc::ClientContext load_ctx;
  v1::LoadModelRequest load;
  load.set_path(*model);
  load.set_model_id("replacement");
  v1::LoadModelResponse loaded;
  ASSERT_TRUE((*d)->stub().LoadModel(&load_ctx, load, &loaded).ok());
  EXPECT_EQ(loaded.model().model_id(), "replacement");
  EXPECT_EQ(loaded.model().state(), v1::MODEL_STATE_READY);
  grpc::ClientContext list_ctx;
  ASSERT_TRUE((*d)->stub().ListModels(&list_ctx, v1::ListModelsRequest(), &resp).ok());
  ASSERT_EQ(resp.models_size(), 1);
  EXPECT_EQ(resp.models(0).model_id(), "replacement");
  EXPECT_EQ(ChildrenOf((*d)->pid()).size(), 1u);
  v1::GenerateRequest req = GreedyRequest("replaced", 2);
  req.set_model_id("replacement");
  EXPECT_TRUE(RunGenerate((*d)->stub(), req).status.ok());
  EXPECT_EQ((*d)->Stop(), 0);
}

TEST(E2eConfigTest, TlsServesSluicectlWithTheCaAndRefusesPlaintext) {
  if (access("/usr/bin/openssl", X_OK) != 0) SLUICE_SKIP("openssl is not installed");
  const std::string dir = MakeTempDir("e2e-tls");
  CommandResult gen = WriteSelfSignedCert(dir);
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  DaemonOptions options;
  options.flags = {"--tls_cert_file=" + dir + "/cert.pem", "--tls_key_file=" + dir + "/key.pem"};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_NE((*d)->Log().find("(TLS)"), std::string::npos) << (*d)->Log();
  const std::string ctl = RunfilePath("clients/sluicectl");
  CommandResult tls = RunCommand({ctl, "--addr=" + (*d)->address(), "--timeout=30",
                                  "--tls_ca_file=" + dir + "/cert.pem", "health"});
  // No model is loaded: the daemon answers, over TLS, that it is not serving.
  EXPECT_EQ(tls.out, "NOT_SERVING\n") << tls.err;
  CommandResult plain =
      RunCommand({ctl, "--addr=" + (*d)->address(), "--timeout=5", "health"});
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_NE(plain.err.find("UNAVAILABLE"), std::string::npos) << plain.err;
  EXPECT_EQ((*d)->Stop(), 0);

  CommandResult bad = Sluiced({"--tls_cert_file=" + dir + "/key.pem.missing",
                               "--tls_key_file=" + dir + "/key.pem"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("not a readable PEM file"), std::string::npos) << bad.err;
}

// A file that validates but whose architecture the worker cannot build: the
// worker's fatal message comes back as INVALID_ARGUMENT, no worker is left
// behind, and a good model loads afterwards.
TEST(E2eConfigTest, UnbuildableModelFailsLoadWithTheWorkersMessage) {
  const std::string dir = MakeTempDir("e2e-config");
  auto good = WriteMicroModel(dir);
  ASSERT_TRUE(good.ok()) << good.status();
  std::ifstream in(*good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "general.architecture";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  // key, then the value: u32 type (8 = string), u64 length, the text.
  const size_t text = at + key.size() + 4 + 8;
  ASSERT_EQ(bytes.substr(text, 9), "qwen35moe");
  bytes.replace(text, 9, "qwen99moe");
  const std::string bad = dir + "/unknown-arch.gguf";
  std::ofstream(bad, std::ios::binary) << bytes;

  auto d = Daemon::Start(DaemonOptions{});
  ASSERT_TRUE(d.ok()) << d.status();
  grpc::ClientContext ctx;
  v1::LoadModelRequest load;
  load.set_path(bad);
  v1::LoadModelResponse resp;
  grpc::Status s = (*d)->stub().LoadModel(&ctx, load, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find(absl::StrCat("LoadModel path='", bad, "'")), std::string::npos)
      << s.error_message();
  // The file's own string stays out of the API's answer (issue 20, item 6):
  // the field and the rule broken are named, the value is withheld.
  EXPECT_NE(s.error_message().find("general.architecture = \"(withheld)\" is not supported"),
            std::string::npos)
      << s.error_message();
  EXPECT_EQ(s.error_message().find("qwen99moe"), std::string::npos) << s.error_message();
  EXPECT_EQ((*d)->Health(), "NOT_SERVING");
  EXPECT_TRUE(ChildrenOf((*d)->pid()).empty());

  grpc::ClientContext ctx2;
  load.set_path(*good);
  ASSERT_TRUE((*d)->stub().LoadModel(&ctx2, load, &resp).ok());
  EXPECT_EQ((*d)->Health(), "SERVING");
  EXPECT_EQ((*d)->Stop(), 0);
}

}  // namespace
}  // namespace sluice::testing
