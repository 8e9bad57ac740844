// A new draft source is one class: "echo", defined and registered in this
// file alone, proposes the last tokens of the text again. It runs through the
// library functions every entry point calls — generate() (`mtpspec
// generate`), the engine with three slots (`generate --prompts --parallel
// 3`), the server's engine (`mtpspec serve`) and the C API (registered there
// through mtpspec_register_draft_source, the same proposals from C
// callbacks) — and every output equals plain generation's, greedy and
// coupled, while its drafts are verified and some accepted.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include <mtpspec.h>

#include "model/loader.h"
#include "serve/engine.h"
#include "speculative/scheduler/generate.h"
#include "speculative/sources/draft_source.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

constexpr const char* kModel = "models/stories260K/stories260K.bin";
constexpr int kEcho = 3;

// The toy source's rule: the last min(3, max_len) committed tokens again.
int echo(const int32_t* committed, size_t n, int max_len, int32_t* out) {
  const int k = std::min<int>({kEcho, max_len, int(n)});
  for (int i = 0; i < k; ++i) out[i] = committed[n - size_t(k) + size_t(i)];
  return k;
}

class EchoSource final : public DraftSource {
 public:
  const char* name() const override { return "echo"; }
  int max_len() const override { return kEcho; }
  void propose(std::span<ProposeJob> jobs) override {
    for (ProposeJob& j : jobs) {
      int32_t buf[kEcho];
      const int k = echo(j.committed.data(), j.committed.size(), j.max_len, buf);
      j.out->assign_chain({buf, size_t(k)}, "echo");
    }
  }
};

const RegisterDraftSource kRegisterEcho(
    "echo", [](const SourceContext&) { return std::make_unique<EchoSource>(); },
    "the last tokens of the text again (a test's toy source)");

// The same rule for the C API (a C callback); counts its calls.
int32_t c_echo(void* calls, uint64_t, const int32_t* committed, size_t n, int32_t max_len,
               int32_t* out) {
  ++*static_cast<std::atomic<long>*>(calls);
  return echo(committed, n, max_len, out);
}
std::atomic<long> c_echo_calls{0};

struct Case {
  std::string prompt;
  float temp;
  uint64_t seed;
};

const std::vector<Case> kCases = {{"Once upon a time", 0.f, 0},
                                  {"Lily and Lily and Lily", 0.f, 0},
                                  {"Tom had a ball. Tom had a ball.", 0.8f, 7},
                                  {"The sun", 0.9f, 8}};
constexpr int kNew = 48, kCtx = 256;

GenerateOptions options(const Case& c) {
  GenerateOptions o;
  o.n_new = kNew;
  o.ctx = kCtx;
  o.sampler.temperature = c.temp;
  o.sampler.seed = c.seed;
  return o;
}

long verified(const std::optional<SpecStats>& s) {
  if (!s) return 0;
  const auto it = s->sources.find("echo");
  return it == s->sources.end() ? 0 : it->second.verified();
}

TEST(ToySource, RunsThroughEveryEntryPointWithPlainOutput) {
  MTP_REQUIRE_SHARED(path, kModel);
  model::LoadedModel lm = model::load_model(path, {});
  std::unique_ptr<io::Tokenizer> tok = io::load_tokenizer(lm.tokenizer);
  model::Model m(std::move(lm));
  std::vector<std::vector<int32_t>> prompts, plain;
  for (const Case& c : kCases) {
    prompts.push_back(tok->encode(c.prompt, true));
    plain.push_back(generate(m, tok.get(), prompts.back(), options(c), nullptr).token_ids);
  }
  // 1. generate(): the engine with one slot (verifying every cycle, and
  // under the budget).
  long seen = 0;
  for (bool gate : {false, true}) {
    for (size_t i = 0; i < kCases.size(); ++i) {
      SpecOptions so;
      so.sources = {"echo"};
      so.gate = gate;
      const GenerateResult r = generate(m, tok.get(), prompts[i], options(kCases[i]), nullptr,
                                        nullptr, so);
      EXPECT_EQ(r.token_ids, plain[i]) << "generate, prompt " << i << " gate " << gate;
      seen += verified(r.stats);
    }
  }
  EXPECT_GT(seen, 20) << "generate never verified the echo source";
  // 2. The engine with three slots, every prompt at once.
  SchedulerOptions eo;
  eo.parallel = 3;
  eo.ctx = kCtx;
  eo.sources = {"echo"};
  eo.adaptive = false;
  Scheduler engine(m, tok.get(), nullptr, eo, nullptr);
  std::map<uint64_t, size_t> which;
  for (size_t i = 0; i < kCases.size(); ++i) {
    Request r;
    r.prompt = prompts[i];
    r.n_new = kNew;
    r.sampler = options(kCases[i]).sampler;
    which[engine.submit(r)] = i;
  }
  seen = 0;
  size_t finished = 0;
  auto take = [&] {
    for (const Event& e : engine.take_events()) {
      if (e.kind != Event::Kind::Finish) continue;
      EXPECT_EQ(e.result->token_ids, plain[which[e.id]]) << "engine, prompt " << which[e.id];
      seen += verified(e.result->stats);
      ++finished;
    }
  };
  while (engine.step()) take();
  take();
  EXPECT_EQ(finished, kCases.size());
  EXPECT_GT(seen, 10) << "the three-slot engine never verified the echo source";
  // 3. The server's engine.
  serve::EngineInfo info;
  info.model_id = "stories260K";
  std::unique_ptr<serve::Engine> server = serve::make_engine(m, *tok, nullptr, nullptr, info, eo);
  EXPECT_EQ(server->info().sources, std::vector<std::string>{"echo"});
  for (size_t i = 0; i < kCases.size(); ++i) {
    serve::Request r;
    r.prompt = prompts[i];
    r.max_tokens = kNew;
    r.sampling = options(kCases[i]).sampler;
    std::mutex mu;
    std::vector<int32_t> got;
    std::atomic<bool> done{false};
    long v = 0;
    server->submit(r, [&](const serve::Event& e) {
      std::lock_guard<std::mutex> lk(mu);
      if (e.type == serve::Event::Type::Token && e.token >= 0) got.push_back(e.token);
      if (e.type == serve::Event::Type::Done) v = verified(e.stats), done = true;
    });
    for (int w = 0; w < 6000 && !done; ++w) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(done) << "no Done event from the server engine";
    std::lock_guard<std::mutex> lk(mu);
    EXPECT_EQ(got, plain[i]) << "server engine, prompt " << i;
    seen += v;
  }
  server->shutdown(false);
  // 4. The C API, its own copy of the registry: the same rule through a C callback.
  ASSERT_EQ(mtpspec_register_draft_source("echo", c_echo, &c_echo_calls, kEcho), MTPSPEC_OK)
      << mtpspec_last_error();
  mtpspec_model_params mp = mtpspec_model_default_params();
  mp.model_path = path.c_str();
  mtpspec_model* cm = nullptr;
  ASSERT_EQ(mtpspec_model_load(&mp, &cm), MTPSPEC_OK) << mtpspec_last_error();
  struct Out {
    std::map<uint64_t, std::vector<int32_t>> tokens;
    long echo_drafted = 0;
  } out;
  mtpspec_engine_params ep = mtpspec_engine_default_params();
  ep.parallel = 3;
  ep.ctx = kCtx;
  ep.draft_sources = "echo";
  ep.user_data = &out;
  ep.callback = [](void* user, const mtpspec_event* e) {
    auto* o = static_cast<Out*>(user);
    if (e->kind != MTPSPEC_EVENT_TOKEN) return;
    o->tokens[e->id].push_back(e->token);
    o->echo_drafted += e->origin == MTPSPEC_ORIGIN_OTHER && std::string(e->source) == "echo";
  };
  mtpspec_engine* ce = nullptr;
  ASSERT_EQ(mtpspec_engine_create(cm, &ep, &ce), MTPSPEC_OK) << mtpspec_last_error();
  std::map<uint64_t, size_t> cwhich;
  for (size_t i = 0; i < kCases.size(); ++i) {
    mtpspec_request r = mtpspec_request_default();
    r.prompt = kCases[i].prompt.c_str();
    r.n_new = kNew;
    r.temperature = kCases[i].temp;
    r.seed = kCases[i].seed;
    uint64_t id = 0;
    ASSERT_EQ(mtpspec_submit(ce, &r, &id), MTPSPEC_OK) << mtpspec_last_error();
    cwhich[id] = i;
  }
  ASSERT_EQ(mtpspec_wait(ce), MTPSPEC_OK) << mtpspec_last_error();
  for (const auto& [id, i] : cwhich) EXPECT_EQ(out.tokens[id], plain[i]) << "C API, prompt " << i;
  EXPECT_GT(c_echo_calls.load(), 20) << "the C API engine hardly asked the C echo source";
  EXPECT_LE(out.echo_drafted, c_echo_calls.load() * kEcho);
  mtpspec_engine_free(ce);
  mtpspec_model_free(cm);
}

}  // namespace
}  // namespace mtp::speculative
