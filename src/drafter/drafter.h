// The MTP drafter: K sequential modules (DeepSeek-V3 formulation, docs/SEMANTICS.md).
//
// Module k, row t: input (h_{k-1}[t], embed(tok[t+k+1])), h_{-1} = the target's
// capture hidden rounded to the hidden dtype; RoPE position t;
//   x = eh_proj · [enorm(embed); hnorm(h)]        (order [e; h], [d, 2d])
//   h_k[t] = block(x)                             (one target-family layer)
//   logits = target final norm + lm_head (+ soft-cap) of h_k[t] -> tok[t+k+2].
// Embedding, final norm and lm_head are the target's, never stored here.
//
// File (safetensors): mtp.{k}.enorm.weight, mtp.{k}.hnorm.weight,
// mtp.{k}.eh_proj.weight [d, 2d], and mtp.{k}.block.<HF layer names>;
// optionally draft_vocab (I32 [n], see DrafterConfig); a module stored in BF16
// is held in BF16 (its exact values), matrices stored as ggml blocks
// (DrafterStorage) are held as stored, bit for bit;
// __metadata__: format = "mtpspec-drafter", format_version, config, target,
// capture, training, created (docs/FORMATS.md).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "drafter/target_record.h"  // TargetMismatch: the recorded-target rule
#include "io/safetensors.h"
#include "kernels/matmul.h"
#include "model/config.h"
#include "model/loader.h"
#include "model/weights.h"

namespace mtp::drafter {

inline constexpr const char* kFormat = "mtpspec-drafter";
inline constexpr int kFormatVersion = 1;
inline constexpr const char* kCapture = "residual after the last decoder layer, before the final norm";

struct DrafterConfig {
  int K = 2;                          // number of modules
  int window = 0;                     // module attention window (0 = unlimited)
  DType hidden_dtype = DType::BF16;   // the capture is rounded to this before module 0
  // Draft vocabulary: the token ids a module may draft, sorted ascending,
  // unique; empty = the whole vocabulary. Modules still compute the target's
  // logits, only for these rows of lm_head (bit-identical values), so drafting
  // reads a fraction of the head. Chosen from the training labels' frequencies
  // at export (train/export.h). Stored as the I32 tensor `draft_vocab`; the
  // config JSON records its size.
  std::vector<int32_t> draft_vocab;
  nlohmann::json to_json() const;
  // FormatError on bad values, naming `where` (the file and field it came from).
  static DrafterConfig from_json(const nlohmann::json& j,
                                 const std::string& where = "drafter config");
};

inline constexpr const char* kDraftVocabTensor = "draft_vocab";

// FormatError naming `what` unless ids are sorted, unique and in [0, vocab).
void check_draft_vocab(const std::vector<int32_t>& ids, int vocab, const std::string& what);

// The block shape of a module: one layer of the target's family, with its own
// K/V and no per-layer embedding input; sliding when the drafter has a window.
// On a target whose full layers have shapes and RoPE of their own (the family
// row's global_layer_shapes: Gemma 4) it is always the sliding kind — head
// width, kv heads, single-width MLP, the sliding layers' RoPE — windowed by
// the drafter's window, or by the target's when that is 0.
model::ModelConfig module_block_config(const model::ModelConfig& target, const DrafterConfig& d);

struct MtpModule {
  std::vector<float> enorm, hnorm;   // [d] (1 + w folded in for Gemma-style norms)
  kernels::PackedMatrix eh_proj;     // [d, 2d]
  model::LayerWeights block;
};

// Every tensor of a drafter for this target, with its shape.
std::vector<std::pair<std::string, std::vector<int64_t>>> drafter_tensor_shapes(
    const model::ModelConfig& target, const DrafterConfig& d);

// How a drafter file stores its tensors (init-drafter / export --dtype): all
// F32, all BF16, or the matrices as ggml blocks of a quantized type — U8
// tensors [rows, row bytes] named in __metadata__["quantized"] (docs/
// FORMATS.md) — with norms and biases in F32 and any matrix the block type
// cannot hold (PackedMatrix::pack's fallback to bf16: cols not a multiple of
// 32) in BF16. Implicit from a DType (the float storages).
inline const std::vector<std::string> kDrafterStorageNames{"fp32", "bf16", "q8_0", "q4_0",
                                                           "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"};
struct DrafterStorage {
  DType floats = DType::F32;                              // F32 | BF16
  kernels::WeightType blocks = kernels::WeightType::F32;  // a block type, or F32 (none)
  DrafterStorage(DType f = DType::F32) : floats(f) {}     // NOLINT: implicit on purpose
  // "fp32" | "bf16" | a block type ("q8_0" ... "q6_k"); InputError otherwise.
  static DrafterStorage parse(const std::string& name);
  bool quantized() const { return kernels::weight_type_quantized(blocks); }
  std::string name() const;  // the --dtype spelling
};

// The values a drafter computes with once stored as `s` (what the parity gate
// compares against): bf16-rounded, or each matrix quantized to its blocks and
// dequantized (exact in fp32); F32 leaves them as they are.
void round_to_storage(std::map<std::string, std::vector<float>>& tensors,
                      const model::ModelConfig& target, const DrafterConfig& d,
                      const DrafterStorage& s);


class Drafter {
 public:
  // Loads `path` for `target`, whose fingerprint (model/fingerprint.h) it
  // computes. Refuses a drafter made for another target ("drafter was trained
  // for target …; this target is …"), another format or a newer version;
  // checks every tensor's shape and values.
  static Drafter load(const std::string& path, const model::LoadedModel& target,
                      kernels::WeightType hold,
                      TargetMismatch mismatch = TargetMismatch::Refuse);
  // The same for a target known only by its config and fingerprint (tests that
  // pose as another target).
  static Drafter load(const std::string& path, const model::ModelConfig& target,
                      const std::string& target_fingerprint, kernels::WeightType hold,
                      TargetMismatch mismatch = TargetMismatch::Refuse);
  // A drafter built from fp32 tensors in memory (training's parity gate,
  // export, random drafters, tests), exactly as write_drafter() would store
  // them as `stored` and load() read them back — same rounding, same checks —
  // without a file. path() is "(in memory)".
  static Drafter from_tensors(const model::ModelConfig& target,
                              const std::string& target_fingerprint, const DrafterConfig& d,
                              const std::map<std::string, std::vector<float>>& tensors,
                              const nlohmann::json& training, const DrafterStorage& stored,
                              kernels::WeightType hold);

  // A copy whose block-quantized matrices are held as fp32 (their exact
  // dequantized values), so the fp32 kernels run them: what the parity gate
  // compares against libtorch. Float-held matrices are shared unchanged.
  Drafter with_float_matrices() const;

  const DrafterConfig& config() const { return cfg_; }
  const model::ModelConfig& block_config() const { return block_cfg_; }
  const std::vector<MtpModule>& modules() const { return modules_; }
  const io::Metadata& metadata() const { return meta_; }
  const std::string& path() const { return path_; }

  // The rows of `lm_head` for the draft vocabulary (null without one), built
  // on first use for this head and kept: every generation's runner shares it
  // instead of repacking (for a large vocabulary that is hundreds of MB).
  // Thread-safe.
  const kernels::PackedMatrix* draft_head(const kernels::PackedMatrix& lm_head) const;

 private:
  static Drafter from_tensor_set(const io::TensorSet& ts, const std::string& path,
                                 const model::ModelConfig& target,
                                 const std::string& target_fingerprint, kernels::WeightType hold,
                                 TargetMismatch mismatch = TargetMismatch::Refuse);
  struct HeadCache;
  std::shared_ptr<HeadCache> heads_;  // shared_ptr: Drafter stays movable
  DrafterConfig cfg_;
  model::ModelConfig block_cfg_;
  std::vector<MtpModule> modules_;
  io::Metadata meta_;
  std::string path_;
};

// m's exact values held as fp32 when it is block-quantized or composite (the
// fp32 kernels then run it: what the parity gate compares with libtorch); m
// itself, sharing its storage, when it is float already.
kernels::PackedMatrix float_matrix(const kernels::PackedMatrix& m);

// The rows `ids` of `head`, held in its precision. [ids.size(), head.cols()]
kernels::PackedMatrix sub_head(const kernels::PackedMatrix& head, std::span<const int32_t> ids);

// Writes a drafter file. `tensors`: fp32 values by name (every name of
// drafter_tensor_shapes, nothing else), stored as `stored` (DrafterStorage).
// `training`: free-form summary stored under __metadata__["training"].
// `vectors_f32`: norm weights and biases stay F32 whatever `stored` is.
void write_drafter(const std::string& path, const model::ModelConfig& target,
                   const std::string& target_fingerprint, const DrafterConfig& d,
                   const std::map<std::string, std::vector<float>>& tensors,
                   const nlohmann::json& training, const DrafterStorage& stored = {},
                   bool vectors_f32 = false);

// Random initial weights (init-drafter, tests): normal(0, 1/sqrt(fan_in)) for
// matrices, norms at their identity (1, or 0 for Gemma-style 1 + w), layer
// scalars 1, biases 0.
std::map<std::string, std::vector<float>> random_drafter_tensors(const model::ModelConfig& target,
                                                                 const DrafterConfig& d,
                                                                 uint64_t seed);

}  // namespace mtp::drafter
