// Flags and set-up shared by the subcommands that run a model.
#pragma once
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

kernels::WeightType parse_weight_type(const std::string& s);
int resolve_threads(int requested);

}  // namespace mtp::app
