// `mtpspec train|export|parity` in the main binary: forwarders to the sibling
// executable bin/mtpspec-train, which holds the libtorch part.
//
// Why two binaries: libtorch loads libprotobuf.so.32 and Debian's
// libsentencepiece exports its own bundled protobuf-lite; a process with both
// crashes during static initialisation. The training subcommands need no
// tokenizer, so they live in mtpspec-train and the main binary execs it with
// the same arguments (exit status and output are the child's).
#pragma once
#include <string>

namespace CLI {
class App;
}

namespace mtp::app {

// Registers `name` on root as a pass-through: every argument after it (incl.
// --help) goes unparsed to `mtpspec-train name ...`. Without the sibling
// binary (a build without libtorch) the callback fails with a clear message.
void add_train_forwarder(CLI::App& root, const std::string& name, const std::string& help);

}  // namespace mtp::app
