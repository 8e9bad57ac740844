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
  bool speculate = true;                    // use the engine's draft sources (if any)
};

// Who produced a token: the target itself, or an accepted draft of `source`.
struct Origin {
  bool drafted = false;
  speculative::DraftOrigin source;
  // "target", "mtp<k>" (MTP module k), or the source's name ("prompt", ...).
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
  std::vector<std::string> sources;  // the engine's draft sources
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

// The engine (scheduler_engine.cc): requests share every target forward
// through speculative::Scheduler (opt.parallel slots; info.ctx and
// info.parallel are set from it), each getting exactly generate()'s tokens.
// The model, tokenizer, pool and drafter (may be null) must outlive it.
std::unique_ptr<Engine> make_engine(const model::Model& m, const io::Tokenizer& tok,
                                    ThreadPool* pool, const drafter::Drafter* drafter,
                                    EngineInfo info, const speculative::SchedulerOptions& opt);

}  // namespace mtp::serve
