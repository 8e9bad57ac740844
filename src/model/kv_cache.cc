#include "model/kv_cache.h"

#include <algorithm>

#include "core/error.h"

namespace mtp::model {

KVCache::KVCache(const ModelConfig& cfg, int n_seq, int ctx, int q_max)
    : ctx_(ctx), q_max_(q_max), kv_dim_(cfg.n_kv_heads * cfg.head_dim) {
  if (n_seq < 1 || ctx < 1 || q_max < 1) {
    fail<InputError>("KV cache: n_seq {}, ctx {}, q_max {} must be positive", n_seq, ctx, q_max);
  }
  window_ = cfg.sliding_window;
  ring_slots_ = std::min(ctx, window_ + q_max);
  slots_.resize(cfg.n_layers);
  for (int l = 0; l < cfg.n_layers; ++l) slots_[l] = cfg.is_sliding(l) ? ring_slots_ : ctx;
  seqs_.resize(n_seq);
  for (auto& s : seqs_) {
    s.k.resize(cfg.n_layers);
    s.v.resize(cfg.n_layers);
    for (int l = 0; l < cfg.n_layers; ++l) {
      s.k[l].assign(size_t(slots_[l]) * kv_dim_, 0.f);
      s.v[l].assign(size_t(slots_[l]) * kv_dim_, 0.f);
    }
    s.ring_pos.assign(ring_slots_, -1);
  }
}

size_t KVCache::bytes() const {
  size_t per = 0;
  for (int s : slots_) per += size_t(s) * kv_dim_ * 2 * sizeof(float);
  return per * seqs_.size();
}

void KVCache::truncate(int seq, int n) {
  Seq& s = seqs_.at(seq);
  if (n < 0 || n > s.length) {
    fail<InputError>("KV truncate of sequence {} to {} positions: it holds {}", seq, n, s.length);
  }
  s.length = n;
  if (ring_slots_ < ctx_ && n > 0) {
    // The next query (position n) sees positions n-window+1 .. n-1 in ring layers.
    for (int p = std::max(0, n - window_ + 1); p < n; ++p) {
      if (s.ring_pos[p % ring_slots_] != p) {
        fail<InputError>("KV truncate of sequence {} to {}: position {} of the sliding window "
                         "was overwritten (roll back at most {} positions at a time)",
                         seq, n, p, q_max_);
      }
    }
  }
}

void KVCache::begin_write(int seq, int pos) {
  Seq& s = seqs_.at(seq);
  int expect = s.length + s.pending;
  if (pos != expect) {
    fail<InputError>("forward row for sequence {} at position {}: the next position is {} "
                     "(rows of a sequence must be consecutive; truncate before rewriting)",
                     seq, pos, expect);
  }
  if (pos >= ctx_) fail<InputError>("position {} is beyond the context of {} tokens", pos, ctx_);
  if (s.pending >= q_max_) {
    fail<InputError>("forward call has more than {} rows for sequence {}", q_max_, seq);
  }
  ++s.pending;
  if (ring_slots_ > 0) s.ring_pos[pos % ring_slots_] = pos;
}

void KVCache::begin_rows(std::span<const Row> rows, int vocab) {
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    if (row.token < 0 || row.token >= vocab) {
      fail<InputError>("forward row {}: token id {} is outside the vocabulary [0, {})", r,
                       row.token, vocab);
    }
    if (row.seq < 0 || row.seq >= n_seq()) {
      fail<InputError>("forward row {}: sequence {} not in the cache ({} sequences)", r, row.seq,
                       n_seq());
    }
  }
  try {
    for (const Row& row : rows) begin_write(row.seq, row.pos);
  } catch (...) {
    for (const Row& row : rows) abort_write(row.seq);
    throw;
  }
}

void KVCache::end_rows(std::span<const Row> rows) {
  for (const Row& row : rows) end_write(row.seq);
}

void KVCache::end_write(int seq) {
  Seq& s = seqs_.at(seq);
  s.length += s.pending;
  s.pending = 0;
}

}  // namespace mtp::model
