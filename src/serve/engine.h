// The server's view of inference: a queue of independent requests, each
// streamed back as events. The HTTP layer (server.h) depends only on this
// interface, so a continuous-batching scheduler can replace SerialEngine
// without touching it.
//
// Contract for every implementation:
// - submit() and cancel() are thread-safe and never block on generation;
// - events of one request arrive in order, from an engine thread, and end
//   with exactly one Done event (also after cancel() or an error);
// - a request's tokens are exactly those speculative::generate() gives for
//   its prompt and settings alone (greedy and coupled sampling; docs/SEMANTICS.md),
//   whatever else runs at the same time;
// - the callback must not block for long (it copies the event and returns).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "speculative/cycle/draft_tree.h"
#include "speculative/scheduler/generate.h"
#include "speculative/sources/history.h"
#include "speculative/scheduler/scheduler.h"
#include "speculative/cycle/sampler.h"
#include "speculative/cycle/spec_loop.h"

namespace mtp::serve {

struct Request {
  std::vector<int32_t> prompt;              // token ids, BOS included when the model wants one
  speculative::SamplerOptions sampling;     // validated by the caller
  speculative::SpecSampling mode = speculative::SpecSampling::Coupled;
  int max_tokens = 0;                       // 0 = until the context is full
  std::vector<std::string> stop;            // stop strings (token_sink.h semantics)
  bool use_drafter = true;                  // speculate when the engine has a drafter
};

// Who produced a token: the target itself, or an accepted draft of `source`.
struct Origin {
  bool drafted = false;
  speculative::DraftSource source;
  // "target", "mtp<k>" (MTP module k), or the source's kind ("prompt", ...).
  std::string name() const;
};

struct Event {
  enum class Type { Token, Done };
  Type type = Type::Token;
  // Token: id (-1 for the text held back until the end), the complete UTF-8
  // text it released (may be empty), its origin.
  int32_t token = -1;
  std::string text;
  Origin origin;
  // Done: OpenAI's finish reason ("stop", "length", "cancelled", "error"),
  // counts, and the speculative statistics when speculation ran.
  std::string finish_reason;
  int prompt_tokens = 0, completion_tokens = 0;
  speculative::Timings timings;
  std::optional<speculative::SpecStats> stats;
  std::string error;  // finish_reason == "error": why
};

using EventFn = std::function<void(const Event&)>;
using Handle = uint64_t;

struct EngineInfo {
  std::string model_id;   // what /v1/models lists
  int ctx = 0;            // positions per sequence (prompt + completion)
  int parallel = 1;       // sequences admitted at once
  bool has_drafter = false;
  int draft_k = 0;
  float draft_p_min = 0.f;  // --draft-p-min: every request's drafts stop below it
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const EngineInfo& info() const = 0;
  // Queues a request (prompt non-empty and shorter than info().ctx: checked
  // by the caller). Throws InputError once shutdown() has begun.
  virtual Handle submit(Request r, EventFn on_event) = 0;
  // Ends the request as soon as possible (finish "cancelled"); unknown or
  // finished handles are ignored.
  virtual void cancel(Handle h) = 0;
  // Gauges. A request leaves them before its Done event is delivered (never
  // after), so whoever has seen the Done reads gauges without it (/metrics).
  virtual size_t queue_depth() const = 0;  // submitted, not yet running
  virtual size_t running() const = 0;
  // Stops accepting; cancel_all: cancels queued and running requests. Returns
  // once every request has had its Done event.
  virtual void shutdown(bool cancel_all) = 0;
};

// The finish reason OpenAI's API uses for a TokenSink one ("eos" -> "stop",
// "context" -> "length").
std::string openai_finish_reason(const std::string& sink_reason);

// The serial engine's draft sources beside the drafter (`serve --serial
// --lookup prompt,history`, speculative/union_proposer.h).
struct SerialOptions {
  // The history datastore (--lookup history; null: off), owned by the engine:
  // it starts with the --lookup-corpus documents, and every finished request
  // adds its prompt and completion (earlier outputs of this process).
  std::unique_ptr<speculative::HistoryStore> history;
  // Every speculating request's lookup_prompt, lookup and gate (as
  // app/spec_common.h apply_lookup_args sets them; gated by default, as
  // `mtpspec generate` is); the engine adds the drafter, history and the rest.
  speculative::SpecOptions spec = [] {
    speculative::SpecOptions o;
    o.gate = true;
    return o;
  }();
};

// One worker thread runs the queued requests one at a time through
// speculative::generate(), the drafter and lookups gated by live gain as
// `mtpspec generate` gates them (gate.h; the gate's state carried from
// request to request). A request with use_drafter false does not speculate.
// The model, tokenizer, pool and drafter (may be null) must outlive the engine.
std::unique_ptr<Engine> make_serial_engine(const model::Model& m, const io::Tokenizer& tok,
                                           ThreadPool* pool, const drafter::Drafter* drafter,
                                           int draft_k, EngineInfo info,
                                           SerialOptions opt = {});

// The continuous-batching engine (batched_engine.cc): requests share every
// target forward through speculative::Scheduler (--parallel slots of
// info.ctx positions; info.ctx and info.parallel are set from the
// scheduler), each still getting exactly generate()'s tokens.
std::unique_ptr<Engine> make_batched_engine(const model::Model& m, const io::Tokenizer& tok,
                                            ThreadPool* pool, const drafter::Drafter* drafter,
                                            int draft_k, EngineInfo info,
                                            const speculative::SchedulerOptions& opt);

}  // namespace mtp::serve
