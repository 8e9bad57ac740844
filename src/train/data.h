// Training data: the sequences a run trains on (TrainData) — the shards written
// by `mtpspec precompute` (docs/SEMANTICS.md "Shards", drafter/shards.h), read
// in place (memory-mapped), or the online capture (train/online_data.h) —
// and the deterministic order in which training visits them.
//
// The order is a pure function of (seed, global sequence index), so the data
// cursor of a run is its step number: a resumed run, and every rank of a
// data-parallel run, picks exactly the sequences an uninterrupted single
// process would. Epoch e visits the training split in a Fisher-Yates
// permutation driven by splitmix64(seed, e) (portable: no std::shuffle).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "drafter/shards.h"

namespace mtp::train {

enum class Split { Train, Heldout };

// B sequences cut to the longest real length L among them (positions past a
// sequence's end are padding with loss_mask 0; causal attention makes the cut
// invisible to every real row).
struct Batch {
  int B = 0, L = 0, d = 0;
  std::vector<int32_t> tokens;  // [B, L]
  std::vector<float> hidden;    // [B, L, d] the stored capture as fp32 (exact)
  std::vector<uint8_t> mask;    // [B, L] loss_mask
  long real_tokens = 0;         // sum of the sequences' real lengths
};

// A split's sequences by index, as batches of capture, tokens and loss mask.
class TrainData {
 public:
  virtual ~TrainData() = default;
  virtual int seq_len() const = 0;
  virtual DType hidden_dtype() const = 0;
  virtual size_t size(Split s) const = 0;
  // The sequences `idx` (indices into the split) as one batch.
  virtual Batch gather(Split s, const std::vector<size_t>& idx) const = 0;
  // What fixes the sequences (and so the weights): joins the run's trajectory.
  virtual nlohmann::json trajectory() const = 0;
  // The data as a run's checkpoint and run.json record it: {key, value}.
  virtual std::pair<std::string, nlohmann::json> record() const = 0;
};

class ShardSet final : public TrainData {
 public:
  // Reads dir/manifest.json and every shard it lists. Refuses (ConfigError)
  // shards whose target_fingerprint differs from `target_fingerprint`, and
  // (FormatError) shards that disagree with the manifest or with d_model.
  ShardSet(const std::string& dir, const std::string& target_fingerprint, int d_model);

  const nlohmann::json& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  int seq_len() const override { return seq_len_; }
  DType hidden_dtype() const override { return hidden_dtype_; }
  size_t size(Split s) const override { return (s == Split::Train ? train_ : held_).size(); }
  long tokens(Split s) const { return s == Split::Train ? train_tokens_ : held_tokens_; }

  Batch gather(Split s, const std::vector<size_t>& idx) const override;
  // {"shards": the manifest's shard list}
  nlohmann::json trajectory() const override;
  // {"shards", {dir, seq_len, counts, corpus}}
  std::pair<std::string, nlohmann::json> record() const override;

 private:
  struct Ref {
    int shard, row;
  };
  std::string dir_;
  nlohmann::json manifest_;
  int seq_len_ = 0, d_ = 0;
  DType hidden_dtype_ = DType::BF16;
  std::vector<drafter::Shard> shards_;
  std::vector<Ref> train_, held_;
  long train_tokens_ = 0, held_tokens_ = 0;
};

// Global sequence index -> training sequence, epoch by epoch.
class DataOrder {
 public:
  DataOrder(size_t n, uint64_t seed) : n_(n), seed_(seed) {}
  size_t at(uint64_t global_index);
  uint64_t epoch_of(uint64_t global_index) const { return n_ ? global_index / n_ : 0; }

 private:
  size_t n_;
  uint64_t seed_;
  uint64_t cached_epoch_ = UINT64_MAX;
  std::vector<size_t> perm_;
};

}  // namespace mtp::train
