// `mtpspec widen`: a function-preserving widening of a target (and its
// drafter) written as a Hugging Face folder (docs/WIDEN.md). The library does
// the work (model/widen.h, drafter/widen_drafter.h); this parses and prints.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <filesystem>
#include <memory>
#include <optional>

#include "app/commands.h"
#include "cli/checks.h"
#include "core/error.h"
#include "drafter/drafter.h"
#include "drafter/widen_drafter.h"
#include "model/fingerprint.h"
#include "model/hf_config.h"
#include "model/loader.h"
#include "model/widen.h"

namespace fs = std::filesystem;

namespace mtp::app {

namespace {
struct WidenArgs {
  std::string model, tokenizer, drafter, shape, out;
  std::string dtype = "bf16";
  std::string drafter_dtype;  // "" = --dtype
  bool allow_inexact = false;
};

void run_widen(const WidenArgs& a) {
  cli::refuse_output_over_inputs("-o", a.out, true, {{"-m", &a.model}, {"--drafter", &a.drafter}});
  const model::ModelConfig src_cfg = model::read_model_config(a.model);
  const model::WidenShape shape = model::parse_widen_shape(a.shape, src_cfg);
  model::WidenPlan plan = model::plan_widen(src_cfg, shape, a.allow_inexact);  // checks first
  model::LoadedModel src = model::load_model(a.model, {kernels::WeightType::F32});  // the stored values
  const DType dtype = a.dtype == "bf16" ? DType::BF16 : DType::F32;
  const std::string tok = a.tokenizer.empty() ? src.tokenizer : a.tokenizer;
  cli::refuse_output_over_inputs("-o", a.out, true, {{"the tokenizer", &tok}});
  // The drafter is loaded (a drafter file, of this target: checked) before
  // anything is written; F32 hold: every packed value is the stored one.
  const std::string src_fp = a.drafter.empty() ? "" : model::target_fingerprint(src);
  std::optional<drafter::Drafter> src_drafter;
  if (!a.drafter.empty()) {
    src_drafter.emplace(drafter::Drafter::load(a.drafter, src_cfg, src_fp, kernels::WeightType::F32));
  }
  const model::ModelConfig& b = plan.dst;
  fmt::print("widening {} ({}: d {}, {} layers, ffn {}, {}/{} heads of {}) to d {}, {} layers, "
             "ffn {}, {}/{} heads of {}, matrices {}\n",
             a.model, model::arch_name(src_cfg.arch), src_cfg.d_model, src_cfg.n_layers,
             src_cfg.ffn, src_cfg.n_heads, src_cfg.n_kv_heads, src_cfg.head_dim, b.d_model,
             b.n_layers, b.ffn, b.n_heads, b.n_kv_heads, b.head_dim, a.dtype);
  const uint64_t bytes = model::write_widened(src, plan, dtype, tok, a.out);
  fmt::print("wrote {} ({:.2f} GB of weights{})\n", a.out, double(bytes) / 1e9,
             tok.empty() ? ", no tokenizer" : "");
  if (plan.exact()) {
    fmt::print("exact: the widened model's logits equal the original's bit for bit (same "
               "--weights)\n");
  } else {
    fmt::print("within rounding:\n");
    for (auto& r : plan.inexact) fmt::print("  - {}\n", r);
  }
  if (!a.drafter.empty()) {
    model::LoadedModel dst;  // the fingerprint needs only the folder and its config
    dst.path = a.out;
    dst.config = model::read_hf_config(a.out);
    const std::string dst_fp = model::target_fingerprint(dst);
    const std::string out = (fs::path(a.out) / "drafter.safetensors").string();
    drafter::widen_drafter(*src_drafter, a.drafter, src_fp, plan,
                           drafter::DrafterStorage::parse(a.drafter_dtype.empty() ? a.dtype
                                                                                  : a.drafter_dtype),
                           dst_fp, out);
    fmt::print("wrote {} for target {}\n", out, dst_fp.substr(0, 16));
  }
}
}  // namespace

void add_widen(CLI::App& root) {
  auto a = std::make_shared<WidenArgs>();
  CLI::App* cmd = root.add_subcommand(
      "widen", "Write a function-preserving widening of a target (and drafter) as a Hugging "
               "Face folder: zero-padded dims, heads, FFN units and layers (docs/WIDEN.md)");
  cmd->add_option("-m,--model", a->model, "Target model (Hugging Face directory, GGUF file or llama2.c .bin)")
      ->required();
  cmd->add_option("--tokenizer", a->tokenizer,
                  "Tokenizer to copy into the folder (default: the one beside the model)");
  cmd->add_option("--drafter", a->drafter,
                  "Drafter of this target to widen too (written as DIR/drafter.safetensors)");
  cmd->add_option("--shape", a->shape,
                  "Preset (1b) or d_model=N,layers=N,ffn=N,heads=N,kv_heads=N,head_dim=N "
                  "(omitted keys keep the source's value)")
      ->required();
  cmd->add_option("--dtype", a->dtype, "Stored precision of the matrices (embedding and norms "
                                       "stay F32)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  cmd->add_option("--drafter-dtype", a->drafter_dtype,
                  "Stored precision of the widened drafter's matrices (default: --dtype): fp32, "
                  "bf16, or ggml blocks q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k (docs/FORMATS.md)")
      ->check(CLI::IsMember(drafter::kDrafterStorageNames));
  cmd->add_flag("--allow-inexact", a->allow_inexact,
                "Accept a shape whose width ratio makes the result only within rounding");
  cmd->add_option("-o,--output", a->out, "Folder to write")->required()
      ->check(cli::OutputDir);
  cmd->callback([a] { run_widen(*a); });
}

}  // namespace mtp::app
