// Counters the server keeps and /metrics prints (Prometheus text format 0.0.4).
// Updated from HTTP threads and engine callbacks: every member is guarded by
// one mutex (a few updates per request, never per token).
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "speculative/spec_loop.h"

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
  // The text exposition, with the engine's gauges.
  std::string prometheus(size_t queue_depth, size_t running) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, long> requests_;   // by endpoint
  std::map<int, long> errors_;             // by HTTP status
  std::map<std::string, long> finishes_;   // by finish reason
  long tokens_ = 0;
  long gone_[2] = {0, 0};                  // client_gone: [non-streamed, streamed]
  std::vector<long> drafted_, accepted_;   // by draft position
  long verify_forwards_ = 0, verify_rows_ = 0;  // speculative cycles, rows they verified
  long plain_forwards_ = 0;                // one-row decode steps of plain requests
};

}  // namespace mtp::serve
