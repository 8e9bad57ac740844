// Training shards (docs/FORMATS.md "Shards"): what precompute writes and the
// trainer, parity and bench read.
//
// SHARDS_DIR/manifest.json + shard-NNNNN.safetensors, each holding S sequences:
//   tokens    int32 [S, seq_len]     one document (or prompt + continuation) per
//                                    sequence, BOS at position 0 when the
//                                    tokenizer uses one, 0 after the end
//   hidden    BF16|F16|F32 [S, seq_len, d]  the target's capture hidden at each
//                                    position, rounded to the hidden dtype
//   loss_mask uint8 [S, seq_len]     1 where tok[t] is a training target: 0 on
//                                    padding and, for self-distillation, on the
//                                    prompt
//   length    int32 [S]              number of real tokens per sequence
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "io/safetensors.h"

namespace mtp::drafter {

inline constexpr const char* kShardsFormat = "mtpspec-shards";
inline constexpr int kShardsVersion = 1;

std::string shard_file_name(int index);  // "shard-00012.safetensors"

// Accumulates sequences and writes one shard file (atomically).
class ShardBuilder {
 public:
  ShardBuilder(int seq_len, int d_model, DType hidden_dtype);
  // tokens: the real tokens (≤ seq_len); hidden: [tokens.size(), d] fp32;
  // mask: [tokens.size()]. Throws InputError for fp16 values beyond ±65,504.
  void add(const std::vector<int32_t>& tokens, const float* hidden,
           const std::vector<uint8_t>& mask);
  int sequences() const { return n_; }
  long real_tokens() const { return real_; }
  void write(const std::string& path, const io::Metadata& meta = {}) const;
  void clear();

 private:
  int seq_len_, d_;
  DType dt_;
  int n_ = 0;
  long real_ = 0;
  std::vector<int32_t> tokens_, lengths_;
  std::vector<uint8_t> hidden_, mask_;  // hidden in dt_ bytes
};

// A shard read back (views into the map; the TensorSet keeps it alive).
struct Shard {
  io::TensorSet file;
  // Copies of tensors whose bytes in the file are not aligned for their
  // element type (safetensors does not align offsets); the pointers below
  // then point here.
  std::vector<std::shared_ptr<const std::vector<uint64_t>>> aligned_copies;
  int sequences = 0, seq_len = 0, d_model = 0;
  DType hidden_dtype = DType::BF16;
  const int32_t* tokens = nullptr;   // [S, seq_len]
  const uint8_t* hidden = nullptr;   // [S, seq_len, d] in hidden_dtype
  const uint8_t* loss_mask = nullptr;
  const int32_t* length = nullptr;   // [S]
  // Hidden row (s, t) as fp32 (exact: every storage type is a subset of fp32).
  void hidden_row(int s, int t, float* out) const;
};
Shard read_shard(const std::string& path);  // validates names, dtypes, shapes

// manifest.json of a shards folder; FormatError if missing keys.
nlohmann::json read_manifest(const std::string& dir);

}  // namespace mtp::drafter
