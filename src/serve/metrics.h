// Counters the server keeps and /metrics prints (Prometheus text format 0.0.4).
// Updated from HTTP threads and engine callbacks: every member is guarded by
// one mutex (a few updates per request, never per token).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "speculative/cycle/spec_loop.h"

namespace mtp::serve {

class Metrics {
 public:
  void request(const std::string& endpoint);                 // a generation request accepted
  void http_error(int status);                               // an error response
  // A finished request: its completion tokens and speculative stats (null: plain).
  void finished(const std::string& finish_reason, int completion_tokens,
                const speculative::SpecStats* stats);
  // A request cancelled because its client went away (a stream that ended
  // early, or a non-streamed request whose client disconnected).
  void client_gone(bool stream);
  struct Gauges {
    size_t queue_depth = 0;  // submitted, not yet running
    size_t running = 0;      // being generated
  };
  // The text exposition. The counters are copied first and gauges() is called
  // after, outside this object's lock (an engine calls finished() under its
  // own lock, so taking the engine's lock under ours could deadlock). With the
  // engines' rule that a request leaves their gauges before its Done event
  // reaches finished(), one scrape never counts a request both as finished
  // and as running or queued.
  std::string prometheus(const std::function<Gauges()>& gauges) const;

 private:
  struct Counters {
    std::map<std::string, long> requests;   // by endpoint
    std::map<int, long> errors;             // by HTTP status
    std::map<std::string, long> finishes;   // by finish reason
    long tokens = 0;
    long gone[2] = {0, 0};                  // client_gone: [non-streamed, streamed]
    std::vector<long> drafted, accepted;    // by draft position
    long verify_forwards = 0, verify_rows = 0;  // speculative cycles, rows they verified
    long plain_forwards = 0;                // one-row decode steps of plain requests
  };
  mutable std::mutex mu_;
  Counters c_;
};

}  // namespace mtp::serve
