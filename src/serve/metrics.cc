#include "serve/metrics.h"

#include <fmt/core.h>

namespace mtp::serve {

void Metrics::request(const std::string& endpoint) {
  std::lock_guard<std::mutex> lk(mu_);
  ++c_.requests[endpoint];
}

void Metrics::http_error(int status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++c_.errors[status];
}

void Metrics::finished(const std::string& reason, int completion_tokens,
                       const speculative::SpecStats* s) {
  std::lock_guard<std::mutex> lk(mu_);
  ++c_.finishes[reason];
  c_.tokens += completion_tokens;
  if (!s) {
    // The first token comes from the prefill; each later one is a 1-row forward.
    c_.plain_forwards += completion_tokens > 1 ? completion_tokens - 1 : 0;
    return;
  }
  if (c_.drafted.size() < s->drafted.size()) {
    c_.drafted.resize(s->drafted.size());
    c_.accepted.resize(s->drafted.size());
  }
  for (size_t k = 0; k < s->drafted.size(); ++k) {
    c_.drafted[k] += s->drafted[k];
    c_.accepted[k] += s->accepted[k];
  }
  c_.verify_forwards += s->cycles;
  c_.verify_rows += s->cycles + s->nodes;  // each verify forwards "next" and every node
}

void Metrics::client_gone(bool stream) {
  std::lock_guard<std::mutex> lk(mu_);
  ++c_.gone[stream ? 1 : 0];
}

std::string Metrics::prometheus(const std::function<Gauges()>& gauges) const {
  Counters c;
  {
    std::lock_guard<std::mutex> lk(mu_);
    c = c_;
  }
  const Gauges g = gauges();  // after the counters: see the header
  std::string o;
  auto head = [&](const char* name, const char* type, const char* help) {
    o += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  head("mtpspec_requests_total", "counter", "Generation requests accepted, by endpoint.");
  for (const char* e : {"completions", "chat"}) {
    auto it = c.requests.find(e);
    o += fmt::format("mtpspec_requests_total{{endpoint=\"{}\"}} {}\n", e,
                     it == c.requests.end() ? 0 : it->second);
  }
  head("mtpspec_requests_finished_total", "counter", "Finished requests, by finish reason.");
  for (const auto& [r, n] : c.finishes) {
    o += fmt::format("mtpspec_requests_finished_total{{reason=\"{}\"}} {}\n", r, n);
  }
  head("mtpspec_requests_cancelled_total", "counter",
       "Requests cancelled because their client went away before the response was complete.");
  o += fmt::format("mtpspec_requests_cancelled_total{{stream=\"false\"}} {}\n", c.gone[0]);
  o += fmt::format("mtpspec_requests_cancelled_total{{stream=\"true\"}} {}\n", c.gone[1]);
  head("mtpspec_http_errors_total", "counter", "Error responses, by HTTP status.");
  for (const auto& [s, n] : c.errors) {
    o += fmt::format("mtpspec_http_errors_total{{status=\"{}\"}} {}\n", s, n);
  }
  head("mtpspec_queue_depth", "gauge", "Requests waiting for the engine.");
  o += fmt::format("mtpspec_queue_depth {}\n", g.queue_depth);
  head("mtpspec_running", "gauge", "Requests the engine is generating.");
  o += fmt::format("mtpspec_running {}\n", g.running);
  head("mtpspec_tokens_generated_total", "counter", "Completion tokens generated.");
  o += fmt::format("mtpspec_tokens_generated_total {}\n", c.tokens);
  head("mtpspec_drafted_total", "counter", "Drafts verified at each draft position.");
  for (size_t k = 0; k < c.drafted.size(); ++k) {
    o += fmt::format("mtpspec_drafted_total{{position=\"{}\"}} {}\n", k, c.drafted[k]);
  }
  head("mtpspec_accepted_total", "counter", "Drafts accepted at each draft position.");
  for (size_t k = 0; k < c.accepted.size(); ++k) {
    o += fmt::format("mtpspec_accepted_total{{position=\"{}\"}} {}\n", k, c.accepted[k]);
  }
  head("mtpspec_acceptance", "gauge",
       "Accepted / drafted at each draft position, over all finished requests.");
  for (size_t k = 0; k < c.drafted.size(); ++k) {
    const double a = c.drafted[k] ? double(c.accepted[k]) / double(c.drafted[k]) : 0.0;
    o += fmt::format("mtpspec_acceptance{{position=\"{}\"}} {}\n", k, a);
  }
  head("mtpspec_verify_rows_per_forward", "gauge",
       "Rows per target decode/verify forward over all finished requests (1 = plain decoding).");
  const long fw = c.verify_forwards + c.plain_forwards;
  o += fmt::format("mtpspec_verify_rows_per_forward {}\n",
                   fw ? double(c.verify_rows + c.plain_forwards) / double(fw) : 0.0);
  return o;
}

}  // namespace mtp::serve
