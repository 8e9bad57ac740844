// Flags and set-up shared by the subcommands that run a model.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "io/tokenizer.h"
#include "model/forward.h"

namespace CLI {
class App;
}

namespace mtp::app {

struct ModelArgs {
  std::string model;      // -m
  std::string tokenizer;  // --tokenizer ("" = the one beside the model)
  std::string weights = "fp32";
  int threads = 0;        // 0 = physical cores
};

// Adds -m/--model (required), --tokenizer, --weights and --threads.
void add_model_flags(CLI::App* cmd, ModelArgs& a);

struct Session {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<io::Tokenizer> tokenizer;
  std::unique_ptr<ThreadPool> pool;
};

// Loads the model, its tokenizer (checks the vocabularies agree) and a pool.
Session open_session(const ModelArgs& a);

// A random target generated in memory (model::random_model: "1b" | "tiny";
// InputError if unknown), held as a.weights, with a.threads; no tokenizer
// (Session::tokenizer is null) — for benchmarks on token ids only.
Session open_random_session(const std::string& preset, const ModelArgs& a, uint64_t seed);

kernels::WeightType parse_weight_type(const std::string& s);
int resolve_threads(int requested);

}  // namespace mtp::app
