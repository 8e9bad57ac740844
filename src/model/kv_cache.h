// Per-sequence key/value cache with explicit length control.
//
// Contract (docs/SEMANTICS.md, docs/INVARIANTS.md invariant 8):
// - length(seq) = number of positions whose K/V are valid: 0..length-1.
// - A forward call appends rows for positions length, length+1, ... (no gaps, no
//   rewrites without a prior truncate); the forward checks this.
// - truncate(seq, n) rolls back to n positions. Nothing written at positions ≥ n
//   can influence later positions: attention reads only positions ≤ the query's,
//   and those are rewritten before they are read again.
// - Sliding-window layers keep a ring of window + q_max slots (position p lives in
//   slot p % slots), so a call of up to q_max rows never overwrites a key still
//   visible to one of its rows. Every slot records which position it holds; a
//   truncate that would need an overwritten key throws instead of reading it.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"

namespace mtp::model {

// One input row of a forward call.
struct Row {
  int32_t seq = 0;    // index into the KV cache's sequences
  int32_t pos = 0;    // position in that sequence (must be its next position)
  int32_t token = 0;  // input token id
};

class KVCache {
 public:
  // ctx: maximum positions per sequence. q_max: maximum rows of one sequence in
  // one forward call.
  KVCache(const ModelConfig& cfg, int n_seq, int ctx, int q_max = 64);

  int n_seq() const { return int(seqs_.size()); }
  int ctx() const { return ctx_; }
  int q_max() const { return q_max_; }
  int length(int seq) const { return seqs_.at(seq).length; }
  void truncate(int seq, int n);
  size_t bytes() const;

  // [slots(layer), kv_dim] storage of K and V for (seq, layer).
  float* k(int seq, int layer) { return seqs_[seq].k[layer].data(); }
  float* v(int seq, int layer) { return seqs_[seq].v[layer].data(); }
  int slots(int layer) const { return slots_[layer]; }
  int kv_dim() const { return kv_dim_; }

  // Validates rows (token in [0, vocab), known sequence, consecutive next
  // positions, context, q_max) and reserves their positions; on any error
  // nothing is reserved and InputError names the offending row.
  void begin_rows(std::span<const Row> rows, int vocab);
  // Makes the reserved positions of every row's sequence valid.
  void end_rows(std::span<const Row> rows);

  // Called by begin_rows: checks that `pos` is the next position of `seq`'s
  // pending write batch and records it in the slot map.
  void begin_write(int seq, int pos);
  // Makes the positions written by begin_write valid (sets length).
  void end_write(int seq);
  // Drops the pending positions of a call that failed validation.
  void abort_write(int seq) { seqs_.at(seq).pending = 0; }

 private:
  struct Seq {
    int length = 0;
    int pending = 0;  // positions written in the current call
    std::vector<std::vector<float>> k, v;
    std::vector<int32_t> ring_pos;  // position held by each ring slot (-1 none)
  };
  int ctx_, q_max_, kv_dim_, ring_slots_ = 0, window_ = 0;
  std::vector<int> slots_;
  std::vector<Seq> seqs_;
};

}  // namespace mtp::model
