#include "speculative/scheduler/trace.h"

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mtp::speculative {

TraceFile::TraceFile(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) fail<IoError>("cannot create the trace file '{}': {}", path, std::strerror(errno));
}

TraceFile::~TraceFile() {
  if (f_) std::fclose(f_);
}

void TraceFile::write(const CycleTrace& t) {
  const std::string line = t.to_json().dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0) {
    fail<IoError>("writing the trace file '{}' failed: {}", path_, std::strerror(errno));
  }
}

TraceFn trace_to(std::shared_ptr<TraceFile> file) {
  return [file = std::move(file)](const CycleTrace& t) { file->write(t); };
}

}  // namespace mtp::speculative
