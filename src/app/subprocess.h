// Running mtpspec's own executables as child processes: the training forwarders
// (app/train_forward.h) exec bin/mtpspec-train, and `mtpspec demo` runs each
// pipeline stage as `mtpspec <stage> ...` so every stage keeps its own progress
// line, exit status and resumability.
#pragma once
#include <string>
#include <vector>

namespace mtp::app {

// Path of a sibling executable of this process (bin/<name>), "" if unknown.
std::string sibling_executable(const std::string& name);

// Path of this process's own executable (/proc/self/exe).
std::string self_executable();

// Where a child's stdout goes: inherited, this process's stderr (keeps our
// stdout for a machine-readable result), or a file (created/truncated).
struct ChildStdout {
  enum Kind { kInherit, kStderr, kFile } kind = kInherit;
  std::string path;  // kFile
};

// Runs `exe args...` and waits. Returns the exit status (128 + signal when
// killed); IoError when it cannot be started.
int run_process(const std::string& exe, const std::vector<std::string>& args,
                const ChildStdout& out = {});

}  // namespace mtp::app
