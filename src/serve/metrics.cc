#include "serve/metrics.h"

#include <fmt/core.h>

namespace mtp::serve {

void Metrics::request(const std::string& endpoint) {
  std::lock_guard<std::mutex> lk(mu_);
  ++requests_[endpoint];
}

void Metrics::http_error(int status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++errors_[status];
}

void Metrics::finished(const std::string& reason, int completion_tokens,
                       const speculative::SpecStats* s) {
  std::lock_guard<std::mutex> lk(mu_);
  ++finishes_[reason];
  tokens_ += completion_tokens;
  if (!s) {
    // The first token comes from the prefill; each later one is a 1-row forward.
    plain_forwards_ += completion_tokens > 1 ? completion_tokens - 1 : 0;
    return;
  }
  if (drafted_.size() < s->drafted.size()) {
    drafted_.resize(s->drafted.size());
    accepted_.resize(s->drafted.size());
  }
  for (size_t k = 0; k < s->drafted.size(); ++k) {
    drafted_[k] += s->drafted[k];
    accepted_[k] += s->accepted[k];
  }
  verify_forwards_ += s->cycles;
  verify_rows_ += s->cycles + s->nodes;  // each verify forwards "next" and every node
}

void Metrics::client_gone(bool stream) {
  std::lock_guard<std::mutex> lk(mu_);
  ++gone_[stream ? 1 : 0];
}

std::string Metrics::prometheus(size_t queue_depth, size_t running) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string o;
  auto head = [&](const char* name, const char* type, const char* help) {
    o += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  head("mtpspec_requests_total", "counter", "Generation requests accepted, by endpoint.");
  for (const char* e : {"completions", "chat"}) {
    auto it = requests_.find(e);
    o += fmt::format("mtpspec_requests_total{{endpoint=\"{}\"}} {}\n", e,
                     it == requests_.end() ? 0 : it->second);
  }
  head("mtpspec_requests_finished_total", "counter", "Finished requests, by finish reason.");
  for (const auto& [r, n] : finishes_) {
    o += fmt::format("mtpspec_requests_finished_total{{reason=\"{}\"}} {}\n", r, n);
  }
  head("mtpspec_requests_cancelled_total", "counter",
       "Requests cancelled because their client went away before the response was complete.");
  o += fmt::format("mtpspec_requests_cancelled_total{{stream=\"false\"}} {}\n", gone_[0]);
  o += fmt::format("mtpspec_requests_cancelled_total{{stream=\"true\"}} {}\n", gone_[1]);
  head("mtpspec_http_errors_total", "counter", "Error responses, by HTTP status.");
  for (const auto& [s, n] : errors_) {
    o += fmt::format("mtpspec_http_errors_total{{status=\"{}\"}} {}\n", s, n);
  }
  head("mtpspec_queue_depth", "gauge", "Requests waiting for the engine.");
  o += fmt::format("mtpspec_queue_depth {}\n", queue_depth);
  head("mtpspec_running", "gauge", "Requests the engine is generating.");
  o += fmt::format("mtpspec_running {}\n", running);
  head("mtpspec_tokens_generated_total", "counter", "Completion tokens generated.");
  o += fmt::format("mtpspec_tokens_generated_total {}\n", tokens_);
  head("mtpspec_drafted_total", "counter", "Drafts verified at each draft position.");
  for (size_t k = 0; k < drafted_.size(); ++k) {
    o += fmt::format("mtpspec_drafted_total{{position=\"{}\"}} {}\n", k, drafted_[k]);
  }
  head("mtpspec_accepted_total", "counter", "Drafts accepted at each draft position.");
  for (size_t k = 0; k < accepted_.size(); ++k) {
    o += fmt::format("mtpspec_accepted_total{{position=\"{}\"}} {}\n", k, accepted_[k]);
  }
  head("mtpspec_acceptance", "gauge",
       "Accepted / drafted at each draft position, over all finished requests.");
  for (size_t k = 0; k < drafted_.size(); ++k) {
    const double a = drafted_[k] ? double(accepted_[k]) / double(drafted_[k]) : 0.0;
    o += fmt::format("mtpspec_acceptance{{position=\"{}\"}} {}\n", k, a);
  }
  head("mtpspec_verify_rows_per_forward", "gauge",
       "Rows per target decode/verify forward over all finished requests (1 = plain decoding).");
  const long fw = verify_forwards_ + plain_forwards_;
  o += fmt::format("mtpspec_verify_rows_per_forward {}\n",
                   fw ? double(verify_rows_ + plain_forwards_) / double(fw) : 0.0);
  return o;
}

}  // namespace mtp::serve
