// The HTTP front end without a worker: authorization, routing and error
// shapes. Generation through a worker is tested end to end in
// tests/e2e_http_test.cc.
#include "daemon/http_api.h"

#include <httplib.h>

#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace sluice::daemon {
namespace {

using Json = nlohmann::json;

class HttpApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto oom = OomContainment::Create("none", "", 0);
    ASSERT_TRUE(oom.ok());
    oom_ = std::move(*oom);
    supervisor_ = std::make_unique<Supervisor>(SupervisorOptions{}, oom_.get(), &metrics_,
                                               [](bool) {});
  }
  void TearDown() override {
    if (server_) server_->Stop();
    supervisor_->Shutdown();
  }

  void Start(HttpAuthorizer authorize) {
    HttpApiOptions options;
    options.address = "127.0.0.1:0";
    options.authorize = std::move(authorize);
    auto server = HttpApiServer::Start(std::move(options), supervisor_.get(), &metrics_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }

  httplib::Result Post(const std::string& path, const std::string& body,
                       const std::string& authorization = "") {
    httplib::Headers headers;
    if (!authorization.empty()) headers.emplace("Authorization", authorization);
    return client_->Post(path.c_str(), headers, body, "application/json");
  }

  Metrics metrics_;
  std::unique_ptr<OomContainment> oom_;
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<HttpApiServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

constexpr char kChat[] = R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})";

// A stand-in for the API-key checker: one valid key, one key without the
// admin role.
absl::Status FakeKeys(absl::string_view authorization, bool admin,
                      std::vector<std::string>* seen) {
  seen->push_back(std::string(authorization) + (admin ? " admin" : " user"));
  if (authorization.empty()) return absl::UnauthenticatedError("an API key is required");
  if (authorization == "Bearer reader") return absl::PermissionDeniedError("read-only key");
  if (authorization != "Bearer good") return absl::UnauthenticatedError("unknown API key");
  return absl::OkStatus();
}

TEST_F(HttpApiTest, AuthorizationHookRefusesWithOpenAiErrors) {
  std::vector<std::string> seen;
  Start([&seen](absl::string_view a, bool admin) { return FakeKeys(a, admin, &seen); });

  auto missing = Post("/v1/chat/completions", kChat);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(missing->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(Json::parse(missing->body), Json::parse(R"({"error": {
      "message": "an API key is required", "type": "authentication_error",
      "param": null, "code": "invalid_api_key"}})"));

  auto wrong = Post("/v1/completions", R"({"prompt": "x"})", "Bearer nope");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(Json::parse(wrong->body)["error"]["message"], "unknown API key");

  auto reader = client_->Get("/v1/models", {{"Authorization", "Bearer reader"}});
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->status, 403);
  EXPECT_EQ(Json::parse(reader->body)["error"]["type"], "permission_error");

  // A valid key reaches the supervisor, which has no model.
  auto good = Post("/v1/chat/completions", kChat, "Bearer good");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 503);
  EXPECT_EQ(Json::parse(good->body)["error"]["message"],
            "no model is loaded; call LoadModel first");

  // Health probes need no key.
  auto health = client_->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(seen, (std::vector<std::string>{" user", "Bearer nope user", "Bearer reader user",
                                            "Bearer good user"}));
}

TEST_F(HttpApiTest, RoutesAndErrorsWithoutAModel) {
  Start(nullptr);
  auto models = client_->Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_EQ(Json::parse(models->body), Json::parse(R"({"object": "list", "data": []})"));

  auto unknown_model = client_->Get("/v1/models/nope");
  ASSERT_TRUE(unknown_model);
  EXPECT_EQ(unknown_model->status, 404);
  EXPECT_EQ(Json::parse(unknown_model->body)["error"]["code"], "model_not_found");

  auto bad_json = Post("/v1/chat/completions", "{");
  ASSERT_TRUE(bad_json);
  EXPECT_EQ(bad_json->status, 400);
  EXPECT_EQ(Json::parse(bad_json->body)["error"]["type"], "invalid_request_error");

  auto bad_type = Post("/v1/completions", R"({"prompt": "x", "top_k": "many"})");
  ASSERT_TRUE(bad_type);
  EXPECT_EQ(bad_type->status, 400);
  EXPECT_EQ(Json::parse(bad_type->body)["error"]["param"], "top_k");

  auto no_route = Post("/v1/nothing", "{}");
  ASSERT_TRUE(no_route);
  EXPECT_EQ(no_route->status, 404);
  EXPECT_EQ(Json::parse(no_route->body)["error"]["message"], "no route for POST /v1/nothing");
  EXPECT_EQ(Json::parse(no_route->body)["error"]["code"], "unknown_url");

  auto down = client_->Get("/health");
  ASSERT_TRUE(down);
  EXPECT_EQ(down->status, 503);
  EXPECT_EQ(Json::parse(down->body)["error"]["type"], "service_unavailable_error");
  server_->SetServing(true);
  auto up = client_->Get("/health");
  ASSERT_TRUE(up);
  EXPECT_EQ(up->status, 200);
  EXPECT_EQ(up->body, R"({"status":"ok"})");
}

TEST_F(HttpApiTest, BadAddressesAreRefused) {
  HttpApiOptions options;
  options.address = "localhost";
  EXPECT_EQ(HttpApiServer::Start(options, supervisor_.get(), &metrics_).status().message(),
            "--http_address='localhost': expected HOST:PORT");
  options.address = "127.0.0.1:0";
  options.tls_cert_file = "/nonexistent/cert.pem";
  options.tls_key_file = "/nonexistent/key.pem";
  auto tls = HttpApiServer::Start(options, supervisor_.get(), &metrics_);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tls.status().message().find("cannot set up TLS"), std::string::npos);
}

}  // namespace
}  // namespace sluice::daemon
