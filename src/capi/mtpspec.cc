// The C API (include/mtpspec.h) over the scheduler (speculative/scheduler.h).
// Every entry point catches everything: no C++ exception crosses the API; a
// failure becomes a status and this thread's message (mtpspec_last_error).
#define MTPSPEC_BUILDING_LIBRARY
#include "mtpspec.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "drafter/drafter.h"
#include "speculative/sources/draft_source.h"
#include "tokenizer/tokenizer.h"
#include "model/forward.h"
#include "model/loader.h"
#include "speculative/scheduler/scheduler.h"

struct mtpspec_model {
  std::unique_ptr<mtp::model::Model> model;
  std::unique_ptr<mtp::io::Tokenizer> tokenizer;
  std::unique_ptr<mtp::drafter::Drafter> drafter;
  std::unique_ptr<mtp::ThreadPool> pool;
  std::atomic<int> engines{0};
};

struct mtpspec_engine {
  mtpspec_model* model = nullptr;
  mtpspec_callback callback = nullptr;
  void* user_data = nullptr;
  // Exactly one of the two: foreground or background.
  std::unique_ptr<mtp::speculative::Scheduler> fg;
  std::unique_ptr<mtp::speculative::BackgroundScheduler> bg;
  size_t kv_bytes = 0;
};

namespace {

thread_local std::string t_error;

mtpspec_status set_error(mtpspec_status s, const std::string& msg) {
  t_error = msg;
  return s;
}

// Runs f, mapping every exception to a status and message.
template <class F>
mtpspec_status guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const mtp::IoError& e) {
    return set_error(MTPSPEC_ERR_IO, e.what());
  } catch (const mtp::FormatError& e) {
    return set_error(MTPSPEC_ERR_FORMAT, e.what());
  } catch (const mtp::ConfigError& e) {
    return set_error(MTPSPEC_ERR_CONFIG, e.what());
  } catch (const mtp::InputError& e) {
    return set_error(MTPSPEC_ERR_INPUT, e.what());
  } catch (const mtp::ShapeError& e) {
    return set_error(MTPSPEC_ERR_FORMAT, e.what());
  } catch (const std::bad_alloc&) {
    return set_error(MTPSPEC_ERR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return set_error(MTPSPEC_ERR_INTERNAL, e.what());
  } catch (...) {
    return set_error(MTPSPEC_ERR_INTERNAL, "unknown exception");
  }
}

void deliver(const mtpspec_engine& e, const mtp::speculative::Event& ev) {
  if (!e.callback) return;
  mtpspec_event c{};
  c.id = ev.id;
  c.piece = ev.piece.c_str();
  c.piece_len = ev.piece.size();
  if (ev.kind == mtp::speculative::Event::Kind::Token) {
    c.kind = MTPSPEC_EVENT_TOKEN;
    c.token = ev.token;
    c.index = ev.index;
    c.origin = !ev.drafted ? MTPSPEC_ORIGIN_TARGET
               : ev.source.is(mtp::speculative::kMtpSource) ? MTPSPEC_ORIGIN_MTP
                                                            : MTPSPEC_ORIGIN_OTHER;
    c.module = ev.drafted ? ev.source.module : 0;
    c.source = ev.drafted ? ev.source.name() : "target";
    c.finish_reason = "";
  } else {
    c.kind = MTPSPEC_EVENT_FINISH;
    c.token = -1;
    c.finish_reason = ev.finish_reason.c_str();
    c.n_prompt = ev.result ? int32_t(ev.result->prompt_ids.size()) : 0;
    c.n_generated = ev.result ? int32_t(ev.result->token_ids.size()) : 0;
  }
  try {
    e.callback(e.user_data, &c);
  } catch (...) {
    // A C callback cannot throw; a C++ one that does is not let through.
  }
}

void deliver_all(const mtpspec_engine& e, mtp::speculative::Scheduler& s) {
  for (const auto& ev : s.take_events()) deliver(e, ev);
}

mtp::speculative::Request to_request(const mtpspec_model& m, const mtpspec_request& r) {
  mtp::speculative::Request q;
  if (r.prompt) {
    q.prompt = m.tokenizer->encode(r.prompt, r.add_special != 0);
  } else {
    if (!r.prompt_ids && r.n_prompt_ids > 0) mtp::fail<mtp::InputError>("prompt_ids is NULL");
    q.prompt.assign(r.prompt_ids, r.prompt_ids + r.n_prompt_ids);
  }
  q.n_new = r.n_new;
  q.sampler.temperature = r.temperature;
  q.sampler.top_k = r.top_k;
  q.sampler.top_p = r.top_p == 0.f ? 1.f : r.top_p;
  q.sampler.min_p = r.min_p;
  q.sampler.seed = r.seed;
  if (r.n_stop > 0 && !r.stop) mtp::fail<mtp::InputError>("stop is NULL with n_stop {}", r.n_stop);
  for (size_t i = 0; i < r.n_stop; ++i) {
    if (!r.stop[i]) mtp::fail<mtp::InputError>("stop string {} is NULL", i);
    q.stop.emplace_back(r.stop[i]);
  }
  q.speculate = r.speculate != 0;
  q.draft_k = r.draft_k;
  return q;
}

// mtpspec_engine_params' source fields → so (InputError naming the field).
void apply_sources(const mtpspec_model& m, const mtpspec_engine_params& p,
                   mtp::speculative::SchedulerOptions& so) {
  using mtp::InputError;
  auto field = [](const char* name, int32_t v, int32_t dflt, int32_t hi) {
    if (v == 0) return dflt;
    if (v < 1 || v > hi) {
      mtp::fail<InputError>("mtpspec_engine_params.{} must be 1..{} (0: {}), got {}", name, hi,
                            dflt, v);
    }
    return v;
  };
  const mtp::speculative::LookupOptions d;
  so.lookup.ngram_max = field("lookup_ngram_max", p.lookup_ngram_max, d.ngram_max, 64);
  so.lookup.max_draft = field("lookup_max_draft", p.lookup_max_draft, d.max_draft, 256);
  // The sources: draft_sources as given, else the drafter (if loaded) and
  // the lookups the fields name.
  if (p.draft_sources) {
    std::string name;
    for (const char* c = p.draft_sources;; ++c) {
      if (*c == ',' || *c == 0) {
        if (name.empty()) {
          mtp::fail<InputError>("mtpspec_engine_params.draft_sources '{}' has an empty name",
                                p.draft_sources);
        }
        so.sources.push_back(name);
        name.clear();
        if (*c == 0) break;
      } else {
        name += *c;
      }
    }
  } else {
    if (m.drafter) so.sources.push_back(mtp::speculative::kMtpSource);
    if (p.lookup_prompt) so.sources.push_back(mtp::speculative::kPromptSource);
    if (p.history_mb > 0) so.sources.push_back(mtp::speculative::kHistorySource);
  }
  if (p.tree) so.tree = mtp::speculative::TreeOptions::parse(p.tree);
  // 0 (none) or a positive bound up to 1 TiB (the store grows only with what
  // it learns; the bound caps it). The comparisons also refuse NaN.
  if (!(p.history_mb >= 0 && p.history_mb <= double(1 << 20))) {
    mtp::fail<InputError>("mtpspec_engine_params.history_mb must be 0 (no history) or a size in "
                          "MiB up to 1048576, got {}", p.history_mb);
  }
  if (p.history_mb > 0) {
    so.history = std::make_shared<mtp::speculative::HistoryStore>(
        so.lookup.ngram_max, std::max<size_t>(1, size_t(p.history_mb * double(1 << 20))));
  }
}

// A draft source whose proposals come from C callbacks (free: no forward).
class CallbackSource final : public mtp::speculative::DraftSource {
 public:
  CallbackSource(const char* name, mtpspec_propose_fn fn, void* user, int32_t max_len)
      : name_(name), fn_(fn), user_(user), max_len_(max_len) {}
  const char* name() const override { return name_; }
  int max_len() const override { return max_len_; }
  void propose(std::span<mtp::speculative::ProposeJob> jobs) override {
    for (mtp::speculative::ProposeJob& j : jobs) {
      out_.assign(size_t(j.max_len), 0);
      const int32_t n = fn_(user_, uint64_t(j.slot), j.committed.data(), j.committed.size(),
                            j.max_len, out_.data());
      out_.resize(size_t(std::clamp(n, 0, j.max_len)));
      j.out->assign_chain(out_, name_);
    }
  }

 private:
  const char* name_;
  mtpspec_propose_fn fn_;
  void* user_;
  int32_t max_len_;
  std::vector<int32_t> out_;
};

}  // namespace

extern "C" {

mtpspec_status mtpspec_register_draft_source(const char* name, mtpspec_propose_fn propose,
                                             void* user_data, int32_t max_len) {
  return guarded([&] {
    if (!name || !propose) {
      return set_error(MTPSPEC_ERR_INPUT, "mtpspec_register_draft_source: NULL argument");
    }
    if (max_len < 1 || max_len > 64) {
      return set_error(MTPSPEC_ERR_INPUT,
                       "mtpspec_register_draft_source: max_len must be 1..64, got " +
                           std::to_string(max_len));
    }
    const std::string n = name;
    mtp::speculative::register_draft_source(
        n,
        [n, propose, user_data, max_len](const mtp::speculative::SourceContext&)
            -> std::unique_ptr<mtp::speculative::DraftSource> {
          return std::make_unique<CallbackSource>(mtp::speculative::draft_source_name(n), propose,
                                                  user_data, max_len);
        },
        "registered through the C API");
    return MTPSPEC_OK;
  });
}

mtpspec_model_params mtpspec_model_default_params(void) { return {}; }

mtpspec_engine_params mtpspec_engine_default_params(void) {
  mtpspec_engine_params p{};
  p.parallel = 4;
  return p;
}

mtpspec_request mtpspec_request_default(void) {
  mtpspec_request r{};
  r.add_special = 1;
  r.n_new = 128;
  r.top_p = 1.f;
  r.speculate = 1;
  return r;
}

const char* mtpspec_version(void) { return "0.1.0"; }

const char* mtpspec_status_name(mtpspec_status s) {
  switch (s) {
    case MTPSPEC_OK: return "ok";
    case MTPSPEC_ERR_IO: return "io";
    case MTPSPEC_ERR_FORMAT: return "format";
    case MTPSPEC_ERR_CONFIG: return "config";
    case MTPSPEC_ERR_INPUT: return "input";
    case MTPSPEC_ERR_NOT_FOUND: return "not_found";
    case MTPSPEC_ERR_STATE: return "state";
    case MTPSPEC_ERR_INTERNAL: return "internal";
  }
  return "unknown";
}

const char* mtpspec_last_error(void) { return t_error.c_str(); }

mtpspec_status mtpspec_model_load(const mtpspec_model_params* p, mtpspec_model** out) {
  return guarded([&] {
    if (!p || !out) return set_error(MTPSPEC_ERR_INPUT, "mtpspec_model_load: NULL argument");
    *out = nullptr;
    if (!p->model_path) return set_error(MTPSPEC_ERR_INPUT, "mtpspec_model_load: no model_path");
    auto m = std::make_unique<mtpspec_model>();
    mtp::model::LoadedModel lm = mtp::model::load_model(p->model_path, {});
    const std::string tok = p->tokenizer_path ? p->tokenizer_path : lm.tokenizer;
    if (tok.empty()) {
      mtp::fail<mtp::IoError>("no tokenizer found beside '{}'; set tokenizer_path", p->model_path);
    }
    m->model = std::make_unique<mtp::model::Model>(std::move(lm));
    m->tokenizer = mtp::io::load_tokenizer(tok);
    mtp::io::check_tokenizer_covers(m->model->config().vocab, *m->tokenizer, tok);
    if (p->drafter_path) {
      m->drafter = std::make_unique<mtp::drafter::Drafter>(mtp::drafter::Drafter::load(
          p->drafter_path, m->model->loaded(), mtp::kernels::WeightType::F32));
    }
    if (p->threads < 0) mtp::fail<mtp::InputError>("threads must be >= 0, got {}", p->threads);
    m->pool = std::make_unique<mtp::ThreadPool>(mtp::resolve_threads(p->threads));
    *out = m.release();
    return MTPSPEC_OK;
  });
}

void mtpspec_model_free(mtpspec_model* m) { delete m; }

int32_t mtpspec_model_vocab(const mtpspec_model* m) { return m ? m->model->config().vocab : 0; }
int32_t mtpspec_model_has_drafter(const mtpspec_model* m) { return m && m->drafter ? 1 : 0; }

mtpspec_status mtpspec_engine_create(mtpspec_model* m, const mtpspec_engine_params* p,
                                     mtpspec_engine** out) {
  return guarded([&] {
    if (!m || !p || !out) return set_error(MTPSPEC_ERR_INPUT, "mtpspec_engine_create: NULL argument");
    *out = nullptr;
    int expected = 0;
    if (!m->engines.compare_exchange_strong(expected, 1)) {
      return set_error(MTPSPEC_ERR_STATE, "this model already has an engine (one at a time)");
    }
    try {
      auto e = std::make_unique<mtpspec_engine>();
      e->model = m;
      e->callback = p->callback;
      e->user_data = p->user_data;
      mtp::speculative::SchedulerOptions so;
      so.parallel = p->parallel;
      so.ctx = p->ctx;
      apply_sources(*m, *p, so);
      auto s = std::make_unique<mtp::speculative::Scheduler>(
          *m->model, m->tokenizer.get(), m->drafter.get(), so, m->pool.get());
      e->kv_bytes = s->kv_bytes();
      if (p->background) {
        mtpspec_engine* raw = e.get();
        e->bg = std::make_unique<mtp::speculative::BackgroundScheduler>(
            std::move(s), [raw](const mtp::speculative::Event& ev) { deliver(*raw, ev); });
      } else {
        e->fg = std::move(s);
      }
      *out = e.release();
      return MTPSPEC_OK;
    } catch (...) {
      m->engines = 0;
      throw;
    }
  });
}

void mtpspec_engine_free(mtpspec_engine* e) {
  if (!e) return;
  guarded([&] {
    if (e->bg) e->bg->stop();  // cancels and delivers what is left
    if (e->fg) {
      e->fg->cancel_all();
      deliver_all(*e, *e->fg);
    }
    return MTPSPEC_OK;
  });
  e->model->engines = 0;
  delete e;
}

size_t mtpspec_engine_kv_bytes(const mtpspec_engine* e) { return e ? e->kv_bytes : 0; }

mtpspec_status mtpspec_submit(mtpspec_engine* e, const mtpspec_request* r, uint64_t* id) {
  return guarded([&] {
    if (!e || !r || !id) return set_error(MTPSPEC_ERR_INPUT, "mtpspec_submit: NULL argument");
    mtp::speculative::Request q = to_request(*e->model, *r);
    *id = e->bg ? e->bg->submit(std::move(q)) : e->fg->submit(std::move(q));
    return MTPSPEC_OK;
  });
}

mtpspec_status mtpspec_cancel(mtpspec_engine* e, uint64_t id) {
  return guarded([&] {
    if (!e) return set_error(MTPSPEC_ERR_INPUT, "mtpspec_cancel: NULL engine");
    const bool ok = e->bg ? e->bg->cancel(id) : e->fg->cancel(id);
    if (!ok) {
      return set_error(MTPSPEC_ERR_NOT_FOUND,
                       "mtpspec_cancel: no waiting or running sequence " + std::to_string(id));
    }
    // Foreground: the Finish event goes out with the next step (or wait).
    return MTPSPEC_OK;
  });
}

mtpspec_status mtpspec_step(mtpspec_engine* e, int32_t* busy) {
  return guarded([&] {
    if (!e) return set_error(MTPSPEC_ERR_INPUT, "mtpspec_step: NULL engine");
    if (e->bg) return set_error(MTPSPEC_ERR_STATE, "mtpspec_step: the engine runs in the background");
    deliver_all(*e, *e->fg);  // e.g. a cancel's Finish
    e->fg->step();
    deliver_all(*e, *e->fg);
    if (busy) *busy = e->fg->idle() ? 0 : 1;
    return MTPSPEC_OK;
  });
}

mtpspec_status mtpspec_wait(mtpspec_engine* e) {
  return guarded([&] {
    if (!e) return set_error(MTPSPEC_ERR_INPUT, "mtpspec_wait: NULL engine");
    if (e->bg) {
      e->bg->wait_idle();
      const std::string err = e->bg->last_error();
      if (!err.empty()) return set_error(MTPSPEC_ERR_INTERNAL, err);
      return MTPSPEC_OK;
    }
    deliver_all(*e, *e->fg);
    while (e->fg->step()) deliver_all(*e, *e->fg);
    deliver_all(*e, *e->fg);
    return MTPSPEC_OK;
  });
}

}  // extern "C"
