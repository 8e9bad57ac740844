// `mtpspec-train train --nproc N`: N data-parallel ranks on this machine, one
// process each (torch c10d, train/dist.h), as torchrun would start them.
//
// This process execs itself N times with the same arguments, --nproc removed
// and --world-size N --rank r --dist-file RUN_DIR/dist-store-<pid> added (a
// c10d FileStore: a fresh file every launch), then waits for every rank. A
// rank that dies makes the others fail at their next collective (Gloo reports
// the closed connection; at the latest the collective timeout) and exit
// non-zero with a message; the launcher then reports which rank failed first
// and exits with its status. A rank still running `grace_s` seconds after
// another failed is killed (it could only wait for the timeout).
#pragma once
#include <string>
#include <vector>

namespace mtp::train_cli {

// args: this process's arguments after the executable (from /proc/self/cmdline).
// Returns the exit status the launcher should exit with (0: every rank succeeded).
int run_local_ranks(int n, const std::vector<std::string>& args, const std::string& run_dir,
                    int grace_s);

// This process's arguments (/proc/self/cmdline), without argv[0].
std::vector<std::string> own_arguments();

}  // namespace mtp::train_cli
