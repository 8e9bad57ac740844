// SerialEngine: the queue and one worker thread. Requests run one at a time,
// each exactly as `mtpspec generate` would run it, so identity with generate
// holds by construction; a batched engine must keep it by its own tests.
#include "serve/engine.h"

#include <fmt/core.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/error.h"

namespace mtp::serve {

std::string Origin::name() const {
  if (!drafted) return "target";
  if (source.kind == speculative::DraftSource::Kind::Mtp) return fmt::format("mtp{}", source.module);
  return source.name();
}

std::string openai_finish_reason(const std::string& r) {
  if (r == "eos" || r == "stop") return "stop";
  if (r == "length" || r == "context") return "length";
  return r;  // "cancelled", "error"
}

namespace {

class SerialEngine final : public Engine {
 public:
  SerialEngine(const model::Model& m, const io::Tokenizer& tok, ThreadPool* pool,
               const drafter::Drafter* drafter, int draft_k, EngineInfo info, SerialOptions opt)
      : m_(m), tok_(tok), pool_(pool), drafter_(drafter), draft_k_(draft_k),
        info_(std::move(info)), opt_(std::move(opt)) {
    opt_.spec.lookup.validate();
    info_.has_drafter = drafter_ != nullptr;
    info_.draft_k = drafter_ ? draft_k_ : 0;
    worker_ = std::thread([this] { run(); });
  }
  ~SerialEngine() override { shutdown(true); }

  const EngineInfo& info() const override { return info_; }

  Handle submit(Request r, EventFn on_event) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) fail<InputError>("the server is shutting down");
    const Handle h = ++next_;
    queue_.push_back({h, std::move(r), std::move(on_event)});
    cv_.notify_all();
    return h;
  }

  void cancel(Handle h) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (h == running_) {
      cancel_running_ = true;
      return;
    }
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->handle == h) {
        it->cancelled = true;  // the worker reports it, in order, without running it
        return;
      }
    }
  }

  size_t queue_depth() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return queue_.size();
  }
  size_t running() const override { return running_ != 0 ? 1 : 0; }

  void shutdown(bool cancel_all) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopping_ = true;
      if (cancel_all) {
        cancel_running_ = true;
        for (auto& j : queue_) j.cancelled = true;
      }
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> jl(join_mu_);
    if (worker_.joinable()) worker_.join();
  }

 private:
  struct Job {
    Handle handle;
    Request req;
    EventFn on_event;
    bool cancelled = false;
  };

  void run() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return !queue_.empty() || stopping_; });
        if (queue_.empty()) return;  // stopping and drained
        job = std::move(queue_.front());
        queue_.pop_front();
        running_ = job.handle;
        cancel_running_ = job.cancelled;
      }
      const Event done = execute(job);
      {
        std::lock_guard<std::mutex> lk(mu_);
        running_ = 0;  // off the gauges before the Done is seen (engine.h)
      }
      job.on_event(done);
    }
  }

  // Runs the job, delivering its token events; returns its Done event.
  Event execute(Job& job) {
    Event done;
    done.type = Event::Type::Done;
    done.prompt_tokens = int(job.req.prompt.size());
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (cancel_running_) {
        done.finish_reason = "cancelled";
        return done;
      }
    }
    speculative::GenerateOptions o;
    o.sampler = job.req.sampling;
    o.stop = job.req.stop;
    o.ctx = info_.ctx;
    const int room = info_.ctx - int(job.req.prompt.size());
    o.n_new = job.req.max_tokens > 0 ? std::min(job.req.max_tokens, room) : room;
    Event ev;
    o.on_token = [&](int32_t token, const speculative::DraftSource* src, std::string_view text) {
      ev.token = token;
      ev.text.assign(text);
      ev.origin.drafted = src != nullptr;
      if (src) ev.origin.source = *src;
      if (token >= 0 || !ev.text.empty()) job.on_event(ev);
      return !cancel_running_.load();
    };
    speculative::SpecOptions so;
    if (job.req.use_drafter) {
      // Gated (opt_.spec.gate, the default): a source below break-even on
      // this traffic costs only its probes. What the gate learned carries to
      // the next request (one worker thread: no lock).
      so = opt_.spec;
      so.drafter = drafter_;
      so.draft_k = drafter_ ? draft_k_ : 0;
      so.p_min = info_.draft_p_min;
      so.mode = job.req.mode;
      so.history = opt_.history.get();
      so.gate_memory = &gate_memory_;
    }
    try {
      speculative::GenerateResult r =
          speculative::generate(m_, &tok_, job.req.prompt, o, pool_, nullptr, so);
      // The history datastore learns this request's prompt and completion
      // (read by the next requests; only this worker thread touches it).
      if (opt_.history) opt_.history->add_request(job.req.prompt, r.token_ids);
      done.finish_reason = openai_finish_reason(r.finish_reason);
      // n_new reached because the context is full is "length" as well.
      done.completion_tokens = int(r.token_ids.size());
      done.timings = r.timings;
      done.stats = r.stats;
    } catch (const std::exception& e) {
      done.finish_reason = "error";
      done.error = e.what();
    }
    return done;
  }

  const model::Model& m_;
  const io::Tokenizer& tok_;
  ThreadPool* pool_;
  const drafter::Drafter* drafter_;
  int draft_k_;
  EngineInfo info_;
  SerialOptions opt_;                    // its history: the worker thread's only
  speculative::GateMemory gate_memory_;  // used by the worker thread only

  mutable std::mutex mu_;
  std::mutex join_mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  Handle next_ = 0;
  std::atomic<Handle> running_{0};
  std::atomic<bool> cancel_running_{false};
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<Engine> make_serial_engine(const model::Model& m, const io::Tokenizer& tok,
                                           ThreadPool* pool, const drafter::Drafter* drafter,
                                           int draft_k, EngineInfo info, SerialOptions opt) {
  return std::make_unique<SerialEngine>(m, tok, pool, drafter, draft_k, std::move(info),
                                        std::move(opt));
}

}  // namespace mtp::serve
