// serve::Engine over the speculative engine (speculative/scheduler/scheduler.h):
// every admitted request's rows share each target forward, and each request
// still gets exactly the tokens generate() gives it alone (the engine's
// identity under load; greedy and coupled sampling).
//
// Threads: submit/cancel/shutdown come from HTTP threads; the scheduler's
// background thread delivers its events to on_event(), which maps them to
// the server's Event and calls the request's EventFn under mu_. A request's
// events that arrive before submit() has recorded its EventFn (the first
// step may run before BackgroundScheduler::submit returns) are kept and
// delivered, in order, once it has.
#include <condition_variable>
#include <map>
#include <mutex>

#include <fmt/core.h>

#include "core/error.h"
#include "serve/engine.h"
#include "speculative/scheduler/params.h"
#include "speculative/scheduler/scheduler.h"

namespace mtp::serve {

std::string Origin::name() const {
  if (!drafted) return "target";
  if (source.is(speculative::kMtpSource)) return fmt::format("mtp{}", source.module);
  return source.name();
}

std::string openai_finish_reason(const std::string& r) {
  if (r == "eos" || r == "stop") return "stop";
  if (r == "length" || r == "context") return "length";
  return r;  // "cancelled", "error"
}

namespace {

class SchedulerEngine final : public Engine {
 public:
  SchedulerEngine(const model::Model& m, const io::Tokenizer& tok, ThreadPool* pool,
                  const drafter::Drafter* drafter, EngineInfo info,
                  const speculative::SchedulerOptions& opt)
      : info_(std::move(info)) {
    auto s = std::make_unique<speculative::Scheduler>(m, &tok, drafter, opt, pool);
    info_.has_drafter = s->priced_len() > 0;
    info_.draft_k = s->priced_len() > 0 ? (opt.draft_k > 0 ? opt.draft_k : s->priced_len()) : 0;
    info_.ctx = s->ctx();
    info_.parallel = s->parallel();
    info_.sources.clear();
    for (const auto& src : s->sources()) info_.sources.push_back(src->name());
    bg_ = std::make_unique<speculative::BackgroundScheduler>(
        std::move(s), [this](const speculative::Event& e) { on_event(e); });
  }
  ~SchedulerEngine() override { shutdown(true); }

  const EngineInfo& info() const override { return info_; }

  Handle submit(Request r, EventFn fn) override {
    speculative::Request q;
    q.n_new = speculative::resolve_n_new(r.max_tokens, int(r.prompt.size()), info_.ctx);
    q.prompt = std::move(r.prompt);
    q.sampler = r.sampling;
    q.stop = std::move(r.stop);
    q.speculate = r.speculate;  // the engine's sources, if it has any
    q.draft_k = info_.draft_k;
    q.p_min = info_.draft_p_min;
    q.mode = r.mode;
    const int prompt_tokens = int(q.prompt.size());
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopping_) fail<InputError>("the server is shutting down");
    }
    const uint64_t id = bg_->submit(std::move(q));  // InputError passes to the caller
    std::lock_guard<std::mutex> lk(mu_);
    Live& l = live_[id];
    l.fn = std::move(fn);
    l.prompt_tokens = prompt_tokens;
    for (const auto& e : early_[id]) deliver(l, e);
    early_.erase(id);
    if (l.done) live_.erase(id);
    return id;
  }

  void cancel(Handle h) override { bg_->cancel(h); }

  size_t queue_depth() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return live_.size() > size_t(info_.parallel) ? live_.size() - size_t(info_.parallel) : 0;
  }
  size_t running() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return std::min(live_.size(), size_t(info_.parallel));
  }

  void shutdown(bool cancel_all) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopped_) return;
      stopping_ = true;
    }
    if (cancel_all) {
      std::vector<uint64_t> ids;
      {
        std::lock_guard<std::mutex> lk(mu_);
        for (const auto& [id, l] : live_) ids.push_back(id);
      }
      for (uint64_t id : ids) bg_->cancel(id);
    }
    bg_->wait_idle();
    bg_->stop();
    std::lock_guard<std::mutex> lk(mu_);
    stopped_ = true;
  }

 private:
  struct Live {
    EventFn fn;
    int prompt_tokens = 0;
    bool done = false;
  };

  void on_event(const speculative::Event& e) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(e.id);
    if (it == live_.end()) {  // submit() has not recorded it yet
      early_[e.id].push_back(e);
      return;
    }
    deliver(it->second, e);
    if (it->second.done) live_.erase(it);
  }

  // Maps one scheduler event to the server's (mu_ held).
  void deliver(Live& l, const speculative::Event& e) {
    if (e.kind == speculative::Event::Kind::Token) {
      Event ev;
      ev.token = e.token;
      ev.text = e.piece;
      ev.origin.drafted = e.drafted;
      if (e.drafted) ev.origin.source = e.source;
      l.fn(ev);
      return;
    }
    if (!e.piece.empty()) {  // text held back until the end (a stop-string prefix)
      Event tail;
      tail.token = -1;
      tail.text = e.piece;
      l.fn(tail);
    }
    Event done;
    done.type = Event::Type::Done;
    done.finish_reason = e.finish_reason == "cancelled" ? "cancelled"
                                                        : openai_finish_reason(e.finish_reason);
    done.prompt_tokens = l.prompt_tokens;
    if (e.result) {
      done.completion_tokens = int(e.result->token_ids.size());
      done.timings = e.result->timings;
      done.stats = e.result->stats;
    }
    l.fn(done);
    l.done = true;
  }

  EngineInfo info_;
  std::unique_ptr<speculative::BackgroundScheduler> bg_;
  mutable std::mutex mu_;
  std::map<uint64_t, Live> live_;
  std::map<uint64_t, std::vector<speculative::Event>> early_;
  bool stopping_ = false, stopped_ = false;
};

}  // namespace

std::unique_ptr<Engine> make_engine(const model::Model& m, const io::Tokenizer& tok,
                                    ThreadPool* pool, const drafter::Drafter* drafter,
                                    EngineInfo info, const speculative::SchedulerOptions& opt) {
  return std::make_unique<SchedulerEngine>(m, tok, pool, drafter, std::move(info), opt);
}

}  // namespace mtp::serve
