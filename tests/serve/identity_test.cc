// The real engine behind the server, with stories260K and a random drafter:
// each request returns exactly what it returns alone, what plain
// speculative::generate() gives, and what `mtpspec generate` prints; and the
// binary's SIGTERM handling (stop accepting, finish in-flight, exit 0).
#include <gtest/gtest.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/core.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli_util.h"
#include "drafter/drafter.h"
#include "model/loader.h"
#include "serve/serve_util.h"
#include "serve/server.h"
#include "speculative/scheduler/generate.h"
#include "test_util.h"

namespace mtp::serve {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const char* kModel = "models/stories260K/stories260K.bin";

std::string write_drafter_file(const std::string& model) {
  const std::string path = test::temp_dir("serve_identity") + "/drafter.safetensors";
  test::CliResult r = test::run_cli("init-drafter -m " + test::shell_quote(model) + " -o " +
                                    test::shell_quote(path) + " --k 3 --seed 5");
  EXPECT_EQ(r.status, 0) << r.err;
  return path;
}

struct Case {
  std::string prompt;
  float temp;
  uint64_t seed;
  std::vector<std::string> stop;
  json body(bool stream) const {
    json b = {{"prompt", prompt}, {"max_tokens", 48}, {"temperature", temp}, {"seed", seed},
              {"top_p", temp > 0 ? 0.95 : 1.0}, {"stream", stream}};
    if (!stop.empty()) b["stop"] = stop;
    return b;
  }
};

// The completion text of a streamed or plain response.
std::string text_of(const httplib::Result& r, bool stream) {
  EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
  if (!r) return {};
  if (!stream) return json::parse(r->body)["choices"][0]["text"];
  std::string text;
  size_t p = 0;
  while ((p = r->body.find("data: ", p)) != std::string::npos) {
    size_t e = r->body.find("\n\n", p);
    std::string d = r->body.substr(p + 6, e - p - 6);
    p = e;
    if (d == "[DONE]") break;
    json j = json::parse(d);
    if (!j["choices"].empty() && j["choices"][0].contains("text")) text += j["choices"][0]["text"];
  }
  return text;
}

// batched: the continuous-batching engine (the default of `mtpspec serve`),
// forced to draft K = 3 every step so verify rows of several requests share
// the forwards; else the serial engine.
void check_identity(const std::string& path, bool batched) {
  const std::string dpath = write_drafter_file(path);
  model::LoadedModel lm = model::load_model(path, {});
  std::unique_ptr<io::Tokenizer> tok = io::load_tokenizer(lm.tokenizer);
  model::Model m(std::move(lm));
  drafter::Drafter d = drafter::Drafter::load(dpath, m.loaded(), kernels::WeightType::F32);
  ThreadPool pool(1);
  std::unique_ptr<Engine> engine =
      test::make_engine(batched, m, *tok, &pool, &d, 3, "stories260K", 256, 4);
  ServerOptions so;
  so.port = 0;
  Server server(*engine, *tok, so);
  const int port = server.bind();
  std::thread th([&] { server.listen(); });

  const std::vector<Case> cases = {{"Once upon a time", 0.f, 0, {}},
                                   {"The cat sat", 0.f, 0, {"."}},
                                   {"Lily went to the park", 0.f, 0, {}},
                                   {"Once upon a time", 0.9f, 11, {}},
                                   {"Tom had a red ball", 0.9f, 12, {" the"}},
                                   {"One day", 1.0f, 13, {}}};
  auto post = [&](const Case& c, bool stream) {
    httplib::Client cl("127.0.0.1", port);
    cl.set_read_timeout(60, 0);
    return text_of(cl.Post("/v1/completions", c.body(stream).dump(), "application/json"), stream);
  };
  std::vector<std::string> alone;
  for (const Case& c : cases) {
    alone.push_back(post(c, false));
    // Plain generation (no drafter), in-process: the lossless reference.
    speculative::GenerateOptions o;
    o.n_new = 48;
    o.sampler.temperature = c.temp;
    o.sampler.top_p = c.temp > 0 ? 0.95f : 1.f;
    o.sampler.seed = c.seed;
    o.stop = c.stop;
    o.ctx = 256;
    auto ref = speculative::generate(m, tok.get(), tok->encode(c.prompt, true), o, &pool);
    EXPECT_EQ(alone.back(), ref.text) << c.prompt << " at T " << c.temp;
    EXPECT_FALSE(alone.back().empty());
  }
  // Concurrently, twice, streamed and not.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::string> got(cases.size() * 2);
    std::vector<std::thread> ts;
    for (size_t i = 0; i < got.size(); ++i) {
      ts.emplace_back([&, i] { got[i] = post(cases[i % cases.size()], i >= cases.size()); });
    }
    for (auto& t : ts) t.join();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], alone[i % cases.size()]) << "request " << i << ", round " << round;
    }
  }
  // The CLI's generate, same prompt and settings.
  const Case& c = cases[3];
  test::CliResult r = test::run_cli(
      fmt::format("generate -m {} --drafter {} --json -p {} -n 48 --temp 0.9 --top-p 0.95 --seed {}",
                  test::shell_quote(path), test::shell_quote(dpath), test::shell_quote(c.prompt),
                  c.seed));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["text"], alone[3]);
  server.stop();
  th.join();
  std::string metrics = server.metrics().prometheus([] { return Metrics::Gauges{}; });
  EXPECT_NE(metrics.find("mtpspec_acceptance{position=\"2\"}"), std::string::npos) << metrics;
}

TEST(ServeIdentity, ConcurrentRequestsEqualAloneGenerateAndTheCli) {
  MTP_REQUIRE_SHARED(path, kModel);
  check_identity(path, /*batched=*/false);
}

TEST(ServeIdentity, BatchedEngineConcurrentRequestsEqualAloneGenerateAndTheCli) {
  MTP_REQUIRE_SHARED(path, kModel);
  check_identity(path, /*batched=*/true);
}

// A port nobody listens on now (bound to 0, read back, closed).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ADD_FAILURE() << "no free port";
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(ServeIdentity, SigtermFinishesInFlightRequestsAndExitsZero) {
  MTP_REQUIRE_SHARED(path, kModel);
  const int port = free_port();
  const std::string bin = MTPSPEC_BIN, ports = std::to_string(port);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl(bin.c_str(), bin.c_str(), "serve", "-m", path.c_str(), "--port", ports.c_str(),
          "--threads", "1", "--no-spec", static_cast<char*>(nullptr));
    _exit(127);
  }
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30, 0);
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    auto r = c.Get("/health");
    up = r && r->status == 200;
    if (!up) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(up) << "the server did not come up";
  // A streamed request in flight when the signal comes; it must end normally.
  std::string body;
  bool signalled = false;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = R"({"prompt":"Once upon a time","max_tokens":400,"temperature":0,"stream":true})";
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    body.append(d, n);
    if (!signalled) {
      signalled = true;
      kill(pid, SIGTERM);
    }
    return true;
  };
  httplib::Client c2("127.0.0.1", port);
  c2.set_read_timeout(30, 0);
  auto res = c2.send(req);
  EXPECT_TRUE(signalled);
  EXPECT_NE(body.find("data: [DONE]"), std::string::npos) << "in-flight stream cut: " << body;
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 500 && !exited; ++i) {
    exited = waitpid(pid, &status, WNOHANG) == pid;
    if (!exited) std::this_thread::sleep_for(20ms);
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the server did not exit within 10 s of SIGTERM";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  httplib::Client c3("127.0.0.1", port);
  c3.set_connection_timeout(1, 0);
  EXPECT_FALSE(c3.Get("/health")) << "still accepting after SIGTERM";
}

}  // namespace
}  // namespace mtp::serve

namespace mtp::serve {
namespace {

TEST(ServeCli, LoopbackByDefaultAndStartupErrors) {
  test::CliResult h = test::run_cli("serve --help");
  ASSERT_EQ(h.status, 0) << h.err;
  EXPECT_NE(h.out.find("127.0.0.1"), std::string::npos) << h.out;  // --host's default
  MTP_REQUIRE_SHARED(path, kModel);
  MTP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  // A tokenizer folder whose chat_template is of no family: start-up refuses (2).
  const std::string dir = test::temp_dir("serve_cli_template");
  std::filesystem::remove(dir + "/tok512.bin");
  std::filesystem::create_symlink(tok, dir + "/tok512.bin");
  std::ofstream(dir + "/tokenizer_config.json")
      << R"({"chat_template": "{% for m in messages %}## {{ m.content }}{% endfor %}"})";
  test::CliResult r = test::run_cli("serve -m " + test::shell_quote(path) + " --tokenizer " +
                                    test::shell_quote(dir + "/tok512.bin") + " --port 0");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--chat-format"), std::string::npos) << r.err;
  EXPECT_EQ(test::run_cli("serve -m " + test::shell_quote(path) + " --chat-format jinja").status, 2);
  // --serial is --parallel 1: both given is refused, not one ignored.
  test::CliResult u =
      test::run_cli("serve -m " + test::shell_quote(path) + " --port 0 --serial --parallel 3");
  EXPECT_EQ(u.status, 2);
  EXPECT_NE(u.err.find("--serial"), std::string::npos) << u.err;
  test::CliResult ns =
      test::run_cli("serve -m " + test::shell_quote(path) + " --port 0 --no-spec --lookup prompt");
  EXPECT_EQ(ns.status, 2);
  EXPECT_NE(ns.err.find("--no-spec"), std::string::npos) << ns.err;
}

}  // namespace
}  // namespace mtp::serve
