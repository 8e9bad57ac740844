#include "speculative/sources/draft_source.h"

#include <algorithm>
#include <deque>
#include <mutex>

#include "core/error.h"
#include "speculative/sources/builtin_source.h"

namespace mtp::speculative {

const char* capture_name(Capture c) {
  switch (c) {
    case Capture::Tokens: return "tokens";
    case Capture::PreNormHidden: return "pre-norm hidden";
    case Capture::PostNormHidden: return "post-norm hidden";
    case Capture::SharedKV: return "shared K/V";
    case Capture::LayerHiddens: return "layer hiddens";
  }
  return "?";
}

// The built-in kinds (mtp_source.cc, lookup_sources.cc, assistant_source.cc,
// native_mtp_source.cc), registered by the
// registry itself on first use: a static library's unreferenced registration
// objects could be dropped by the linker.
void register_mtp_source();
void register_lookup_sources();
void register_assistant_source();
void register_native_mtp_source();

namespace {

struct Entry {
  std::string name, help;
  SourceFactory make;
};

struct Registry {
  std::mutex mu;
  std::deque<Entry> entries;  // a deque: names keep their addresses (DraftOrigin)
};

Registry& raw_registry() {
  static Registry r;
  return r;
}

bool valid_name(std::string_view n) {
  if (n.empty() || n.size() > 32) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
}

void add(std::string_view name, SourceFactory make, std::string help) {
  if (!valid_name(name)) {
    fail<InputError>("draft source name '{}': use 1..32 letters, digits, '-' or '_'", name);
  }
  Registry& r = raw_registry();
  std::lock_guard<std::mutex> lk(r.mu);
  for (const Entry& e : r.entries) {
    if (e.name == name) fail<InputError>("a draft source named '{}' is registered already", name);
  }
  r.entries.push_back({std::string(name), std::move(help), std::move(make)});
}

// The registry with the built-ins in it (first, in this order).
Registry& registry() {
  static std::once_flag builtins;
  std::call_once(builtins, [] {
    register_mtp_source();
    register_lookup_sources();
    register_assistant_source();
    register_native_mtp_source();
  });
  return raw_registry();
}

}  // namespace

DraftSource::Cost cost_from_calls(const std::function<double(int q)>& call) {
  auto median_s = [&](int q) {
    std::vector<double> t;
    for (int r = 0; r < 7; ++r) t.push_back(call(q));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  DraftSource::Cost c;
  c.call_s = median_s(2);
  c.row_s = std::max(0.0, (median_s(34) - c.call_s) / 32);
  return c;
}

void register_builtin_source(std::string_view name, SourceFactory make, std::string help) {
  add(name, std::move(make), std::move(help));
}

void register_draft_source(std::string_view name, SourceFactory make, std::string help) {
  registry();  // the built-ins keep their names and come first
  add(name, std::move(make), std::move(help));
}

std::unique_ptr<DraftSource> make_draft_source(std::string_view name, const SourceContext& c) {
  Registry& r = registry();
  SourceFactory make;
  std::string known;
  {
    std::lock_guard<std::mutex> lk(r.mu);
    for (const Entry& e : r.entries) {
      if (e.name == name) make = e.make;
      known += (known.empty() ? "" : ", ") + e.name;
    }
  }
  if (!make) fail<InputError>("no draft source is named '{}' (registered: {})", name, known);
  std::unique_ptr<DraftSource> s = make(c);
  MTP_CHECK(s && std::string_view(s->name()) == name, "draft source '{}' made a source named '{}'",
            name, s ? s->name() : "(none)");
  return s;
}

std::vector<std::pair<std::string, std::string>> draft_sources() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  std::vector<std::pair<std::string, std::string>> out;
  for (const Entry& e : r.entries) out.emplace_back(e.name, e.help);
  return out;
}

const char* draft_source_name(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  for (const Entry& e : r.entries) {
    if (e.name == name) return e.name.c_str();
  }
  return nullptr;
}

SourceProposer::SourceProposer(DraftSource& s, const TargetSession& target,
                               const SamplerOptions& sampling, SpecSampling mode, float p_min)
    : s_(s), target_(target), sampler_(sampling), mode_(mode), p_min_(p_min) {}

void SourceProposer::propose(std::span<const int32_t> committed, int max_k, DraftTree& tree) {
  ProposeJob j;
  j.committed = committed;
  j.target = &target_;
  j.max_len = max_k;
  j.p_min = p_min_;
  j.sampler = &sampler_;
  j.mode = mode_;
  j.out = &tree;
  j.scores = &scores_;
  s_.propose({&j, 1});
}

}  // namespace mtp::speculative
