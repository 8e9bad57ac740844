// `--trace FILE`: one JSON line per verify cycle per sequence
// (CycleTrace::to_json, docs/SEMANTICS.md "Trace"), appended as the engine
// runs — the step-by-step replay of live speculation: what each source
// proposed, what was verified, the target's choices, what was accepted.
#pragma once
#include <cstdio>
#include <memory>
#include <string>

#include "speculative/scheduler/scheduler.h"

namespace mtp::speculative {

class TraceFile {
 public:
  // Creates (truncates) `path`; IoError naming it when it cannot be opened.
  explicit TraceFile(const std::string& path);
  ~TraceFile();
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;
  // One line, flushed (a killed process leaves whole lines); IoError naming
  // the file on a failed write (a full disk, a file size limit).
  void write(const CycleTrace& t);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

// The engine's trace callback writing to `file` (which it keeps alive).
TraceFn trace_to(std::shared_ptr<TraceFile> file);

}  // namespace mtp::speculative
