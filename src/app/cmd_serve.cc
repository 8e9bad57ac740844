// `mtpspec serve`: the OpenAI-compatible HTTP server (src/serve/server.h).
// Parses flags, loads the model, tokenizer, drafter and chat template, and
// runs the server until SIGTERM/SIGINT: then it stops accepting, lets the
// in-flight requests finish for --shutdown-grace seconds, cancels what is
// left, and exits 0.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "app/commands.h"
#include "app/common.h"
#include "app/spec_common.h"
#include "cli/checks.h"
#include "core/error.h"
#include "core/progress.h"
#include "io/gguf.h"
#include "serve/chat_template.h"
#include "serve/engine.h"
#include "serve/server.h"
#include "speculative/scheduler/generate.h"
#include "speculative/scheduler/trace.h"

namespace fs = std::filesystem;

namespace mtp::app {

namespace {

struct ServeArgs {
  ModelArgs model;
  DrafterArgs spec;
  LookupArgs lookup;
  std::string host = "127.0.0.1";
  int port = 8080;
  int parallel = 4;
  bool serial = false;
  int ctx = 0;
  std::string trace;
  std::string api_key, chat_format;
  size_t max_body = 1 << 20;
  int timeout = 30;
  int request_timeout = 10;
  int max_conns_per_client = 64;
  double grace = 10;
};

std::string model_id(const std::string& path) {
  fs::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  return fs::is_directory(p) ? p.filename().string() : p.stem().string();
}

void run_serve(ServeArgs a) {
  refuse_lookups_without_spec(a.spec, a.lookup);
  if (!a.spec.tree.empty() || a.spec.tree_budget > 0) {
    check_speculation_flags(a.spec, SamplingArgs{});
  }
  // Block the stop signals in every thread (the pools start below inherit the
  // mask); one thread takes them with sigwait.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a vanished client is a failed write, not a crash

  Session s = open_session(a.model);
  std::unique_ptr<drafter::Drafter> dr;
  std::shared_ptr<const drafter::Gemma4Assistant> as;
  if (!a.spec.no_spec) dr = open_drafter(a.model, a.spec, *s.model);
  if (!a.spec.no_spec) as = open_assistant(a.model, a.spec, *s.model);

  const fs::path tdir = a.model.tokenizer.empty()
                            ? (fs::is_directory(a.model.model) ? fs::path(a.model.model)
                                                               : fs::path(a.model.model).parent_path())
                            : (fs::is_directory(a.model.tokenizer)
                                   ? fs::path(a.model.tokenizer)
                                   : fs::path(a.model.tokenizer).parent_path());
  serve::ServerOptions so;
  // A GGUF model carries its template (tokenizer.chat_template) unless a
  // --tokenizer folder is given.
  so.chat = a.model.tokenizer.empty() && io::GgufFile::has_magic(a.model.model)
                ? serve::load_gguf_chat_template(a.model.model, a.chat_format)
                : serve::load_chat_template(tdir.string(), a.chat_format);
  so.host = a.host;
  so.port = a.port;
  so.api_key = a.api_key;
  so.max_body = a.max_body;
  so.timeout_s = a.timeout;
  so.request_timeout_s = a.request_timeout;
  so.max_conns_per_client = a.max_conns_per_client;
  so.http_threads = std::max(8, 4 * a.parallel + 4);

  serve::EngineInfo info;
  info.model_id = model_id(a.model.model);
  info.draft_p_min = a.spec.p_min;
  // 0 ctx: the engine caps it so every slot fits in memory.
  speculative::SchedulerOptions sched = engine_options(
      a.spec, a.lookup, dr.get(), s.tokenizer.get(), a.serial ? 1 : a.parallel, a.ctx, as);
  if (!a.trace.empty()) {
    sched.trace = speculative::trace_to(std::make_shared<speculative::TraceFile>(a.trace));
  }
  std::unique_ptr<serve::Engine> engine =
      serve::make_engine(*s.model, *s.tokenizer, s.pool.get(), dr.get(), info, sched);
  serve::Server server(*engine, *s.tokenizer, so);
  const int port = server.bind();
  std::string sources;
  for (const std::string& n : engine->info().sources) sources += (sources.empty() ? "" : ",") + n;
  fmt::print(stderr, "mtpspec serve: {} (ctx {}, {} slots, chat format {}, drafter {}, draft "
             "sources {}) listening on http://{}:{}\n", info.model_id, engine->info().ctx,
             engine->info().parallel, serve::chat_format_name(so.chat.format),
             dr ? dr->path() : as ? as->path() : "none", sources.empty() ? "none" : sources,
             a.host, port);
  std::fflush(stderr);

  std::mutex mu;
  std::condition_variable cv;
  bool listening_done = false;
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (sig == SIGTERM || sig == SIGINT) {
      note("mtpspec serve: signal {}: finishing in-flight requests\n", sig);
      server.stop_accepting();
      std::unique_lock<std::mutex> lk(mu);
      if (!cv.wait_for(lk, std::chrono::duration<double>(a.grace), [&] { return listening_done; })) {
        note("mtpspec serve: cancelling what is left after {} s\n", a.grace);
        engine->shutdown(/*cancel_all=*/true);
      }
    }
  });
  server.listen();
  {
    std::lock_guard<std::mutex> lk(mu);
    listening_done = true;
  }
  cv.notify_all();
  engine->shutdown(/*cancel_all=*/true);
  // listen() returns only after stop(): the watcher has its signal already.
  watcher.join();
  fmt::print(stderr, "mtpspec serve: stopped\n");
}

}  // namespace

void add_serve(CLI::App& root) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = root.add_subcommand(
      "serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, a live "
               "page at /)");
  add_model_flags(cmd, a->model);
  add_drafter_flags(cmd, a->spec, kAllDrafterFlags | kFlagTree);
  add_lookup_flags(cmd, a->lookup);
  cmd->add_option("--host", a->host, "Address to listen on (0.0.0.0: every interface)")
      ->check(cli::NonEmpty)  // "" listened on every interface, unasked
      ->capture_default_str();
  cmd->add_option("--port", a->port, "TCP port (0: any free port, printed)")
      ->check(cli::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--parallel", a->parallel,
                  "Requests decoded at once: slots of the continuous-batching scheduler, each "
                  "--ctx positions (more wait in a queue)")
      ->check(cli::Range(1, 256))
      ->capture_default_str();
  cmd->add_flag("--serial", a->serial, "Run requests one at a time (--parallel 1)")
      ->excludes(cmd->get_option("--parallel"));
  cmd->add_option("--trace", a->trace,
                  "Write one JSON line per verify cycle per request to FILE (docs/SEMANTICS.md, "
                  "Trace)")
      ->check(cli::OutputFile);
  cmd->add_option("--ctx", a->ctx,
                  "Context per request, prompt + completion (default: the model's maximum, "
                  "capped by memory)")
      ->check(cli::NonNegative);
  cmd->add_option("--api-key", a->api_key,
                  "Require 'Authorization: Bearer KEY' on every route but /health and /");
  cmd->add_option("--chat-format", a->chat_format,
                  "Chat format instead of the model's chat_template: " +
                      fmt::format("{}", fmt::join(serve::chat_format_names(), ", ")))
      ->check(CLI::IsMember(serve::chat_format_names()));
  cmd->add_option("--max-body", a->max_body, "Largest request body in bytes (larger: 413)")
      ->check(cli::Range(64, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--timeout", a->timeout,
                  "Socket write timeout in seconds (a client that stops reading its response)")
      ->check(cli::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--request-timeout", a->request_timeout,
                  "Seconds a connection has to send a whole request, head and body (else 408; "
                  "at most --timeout); slow senders never hold a worker meanwhile")
      ->check(cli::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--max-conns-per-client", a->max_conns_per_client,
                  "Connections open at once per client address (more: 429)")
      ->check(cli::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--shutdown-grace", a->grace,
                  "Seconds in-flight requests may run on after SIGTERM before they are cancelled")
      ->check(cli::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->callback([a] { run_serve(*a); });
}

}  // namespace mtp::app
