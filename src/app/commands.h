// CLI subcommands. Each add_* registers one subcommand on the root CLI11 app:
// its flags (every flag with a help text) and a callback that runs it. Errors are
// thrown as mtp::Error subclasses; exit statuses: cli/run_cli.h.
#pragma once

namespace CLI {
class App;
}

namespace mtp::app {

void add_generate(CLI::App& root);       // cmd_generate.cc
void add_tokenize(CLI::App& root);       // cmd_tokenize.cc
void add_bench_kernels(CLI::App& root);  // cmd_bench_kernels.cc
void add_init_drafter(CLI::App& root);   // cmd_init_drafter.cc
void add_precompute(CLI::App& root);     // cmd_precompute.cc
void add_drift(CLI::App& root);          // cmd_drift.cc
void add_bench_decode(CLI::App& root);   // cmd_bench_decode.cc
void add_bench(CLI::App& root);          // cmd_bench.cc
void add_demo(CLI::App& root);           // cmd_demo.cc
void add_widen(CLI::App& root);          // cmd_widen.cc
void add_serve(CLI::App& root);          // cmd_serve.cc
void add_pretrain(CLI::App& root);       // cmd_pretrain.cc (execs mtpspec-train pretrain-model)
// train, export, parity: forwarders to bin/mtpspec-train (train_forward.h);
// without libtorch they fail with "built without libtorch".
void add_train_forwarders(CLI::App& root);  // train_forward.cc

}  // namespace mtp::app
