#include "model/kv_cache.h"

#include <algorithm>

#include "core/error.h"
#include "model/delta_rule.h"

namespace mtp::model {

namespace {
// The K/V stores of a cache: per layer that owns its K/V, its slots and
// width (the one rule the cache's allocation and bytes_for share).
struct KvStore {
  int layer, slots, kv_dim;
};
std::vector<KvStore> kv_stores(const ModelConfig& cfg, int ctx, int q_max) {
  std::vector<KvStore> out;
  const int ring = std::min(ctx, cfg.sliding_window + q_max);
  for (int l = 0; l < cfg.n_layers; ++l) {
    const LayerKind k = cfg.layer_kind(l);
    if (k.recurrent || !k.owns_kv()) continue;
    out.push_back({l, k.sliding ? ring : ctx, k.n_kv_heads * k.head_dim});
  }
  return out;
}
}  // namespace

size_t KVCache::bytes_for(const ModelConfig& c, int n_seq, int ctx, int q_max, int tree_slots) {
  const size_t tree = size_t(tree_slots < 0 ? q_max : std::min(tree_slots, q_max));
  size_t per = 0;
  for (const KvStore& s : kv_stores(c, ctx, q_max)) {
    per += (size_t(s.slots) + tree) * size_t(s.kv_dim) * 2 * sizeof(float);
  }
  return (per + recurrent_bytes(c, q_max)) * size_t(n_seq);
}

KVCache::KVCache(const ModelConfig& cfg, int n_seq, int ctx, int q_max, int tree_slots)
    : ctx_(ctx), q_max_(q_max),
      tree_slots_(tree_slots < 0 ? q_max : std::min(tree_slots, q_max)) {
  if (n_seq < 1 || ctx < 1 || q_max < 1) {
    fail<InputError>("KV cache: n_seq {}, ctx {}, q_max {} must be positive", n_seq, ctx, q_max);
  }
  window_ = cfg.sliding_window;
  ring_slots_ = std::min(ctx, window_ + q_max);
  store_.resize(size_t(cfg.n_layers));
  rec_index_.assign(size_t(cfg.n_layers), -1);
  linear_ = cfg.linear;
  for (const KvStore& s : kv_stores(cfg, ctx, q_max)) {
    store_[size_t(s.layer)] = int(slots_.size());
    slots_.push_back(s.slots);
    kv_dim_.push_back(s.kv_dim);
  }
  for (int l = 0; l < cfg.n_layers; ++l) {
    const LayerKind k = cfg.layer_kind(l);
    if (k.recurrent) {
      rec_index_[size_t(l)] = int(rec_layer_.size());
      rec_layer_.push_back(l);
      store_[size_t(l)] = -1;
    } else if (!k.owns_kv()) {
      store_[size_t(l)] = store_[size_t(k.kv_source)];  // validated: an earlier owner
    }
  }
  seqs_.resize(size_t(n_seq));
  for (auto& s : seqs_) {
    s.k.resize(slots_.size());
    s.v.resize(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) {
      s.k[i].assign(size_t(slots_[i] + tree_slots_) * size_t(kv_dim_[i]), 0.f);
      s.v[i].assign(size_t(slots_[i] + tree_slots_) * size_t(kv_dim_[i]), 0.f);
    }
    s.ring_pos.assign(size_t(ring_slots_), -1);
  }
  if (rec_layer_.empty()) return;
  rec_ring_ = q_max + linear_.conv_kernel - 1;
  ring_row_ = size_t(linear_.conv_dim()) + 2 * size_t(linear_.v_heads);
  for (auto& s : seqs_) {
    for (auto& st : s.state) st.assign(rec_layer_.size(), std::vector<float>(linear_.state_floats()));
    s.ring.assign(rec_layer_.size(), std::vector<float>(size_t(rec_ring_) * ring_row_));
  }
}

size_t KVCache::recurrent_bytes(const ModelConfig& c, int q_max) {
  size_t layers = 0;
  for (int l = 0; l < c.n_layers; ++l) layers += c.is_recurrent(l) ? 1 : 0;
  if (layers == 0) return 0;
  const LinearAttn& a = c.linear;
  const size_t ring = size_t(q_max + a.conv_kernel - 1) * (size_t(a.conv_dim()) + 2 * size_t(a.v_heads));
  return layers * (2 * a.state_floats() + ring) * sizeof(float);
}

size_t KVCache::recurrent_bytes_per_seq() const {
  return rec_layer_.size() *
         (2 * linear_.state_floats() + size_t(rec_ring_) * ring_row_) * sizeof(float);
}

float* KVCache::rec_state(int seq, int layer) {
  Seq& s = seqs_.at(seq);
  return s.state[s.cur][size_t(rec_index_.at(size_t(layer)))].data();
}

const float* KVCache::rec_source(const Row& row, int layer) const {
  const Seq& s = seqs_.at(row.seq);
  const int buf = row.pos == s.call_base ? 1 - s.cur : s.cur;
  return s.state[buf][size_t(rec_index_.at(size_t(layer)))].data();
}

float* KVCache::ring_row(int seq, int layer, int pos, size_t offset) {
  MTP_CHECK(pos >= 0, "recurrent ring position {}", pos);
  Seq& s = seqs_.at(seq);
  return s.ring[size_t(rec_index_.at(size_t(layer)))].data() +
         size_t(pos % rec_ring_) * ring_row_ + offset;
}

float* KVCache::conv_input(int seq, int layer, int pos) {
  return pos < 0 ? nullptr : ring_row(seq, layer, pos, 0);
}

const float* KVCache::conv_input(int seq, int layer, int pos) const {
  return const_cast<KVCache*>(this)->conv_input(seq, layer, pos);
}

float* KVCache::gates(int seq, int layer, int pos) {
  return ring_row(seq, layer, pos, size_t(linear_.conv_dim()));
}

void KVCache::replay(int seq, int n) {
  Seq& s = seqs_.at(seq);
  const int rows = n - s.call_base + replay_fault_;
  MTP_CHECK(rows >= 0 && s.call_base + rows <= s.length,
            "replay of {} rows from position {} of sequence {} (length {})", rows, s.call_base,
            seq, s.length);
  const LinearAttn& a = linear_;
  const int C = a.conv_dim(), kc = a.conv_kernel;
  std::vector<float> qkv(static_cast<size_t>(C));
  std::vector<const float*> in(static_cast<size_t>(kc));
  const size_t S = size_t(a.k_dim) * size_t(a.v_dim);
  for (size_t li = 0; li < rec_layer_.size(); ++li) {
    const int layer = rec_layer_[li];
    MTP_CHECK(layer < int(conv_w_.size()) && conv_w_[size_t(layer)],
              "a rollback of a recurrent layer needs its conv weights (KVCache::bind_conv_weights)");
    const float* snap = s.state[1 - s.cur][li].data();
    float* cur = s.state[s.cur][li].data();
    if (rows == 0) std::copy_n(snap, s.state[s.cur][li].size(), cur);
    for (int r = 0; r < rows; ++r) {
      const int p = s.call_base + r;
      for (int i = 0; i < kc; ++i) in[size_t(i)] = conv_input(seq, layer, p - kc + 1 + i);
      delta::conv_silu(in.data(), conv_w_[size_t(layer)], C, kc, qkv.data());
      delta::normalize_qk(a, qkv.data());
      const float* g = gates(seq, layer, p);
      for (int h = 0; h < a.v_heads; ++h) {
        const float* src = (r == 0 ? snap : cur) + size_t(h) * S;
        delta::step(a, h, src, cur + size_t(h) * S, qkv.data(), g[h], g[a.v_heads + h], nullptr);
      }
    }
  }
}

size_t KVCache::bytes() const {
  size_t per = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    per += size_t(slots_[i] + tree_slots_) * size_t(kv_dim_[i]) * 2 * sizeof(float);
  }
  return (per + recurrent_bytes_per_seq()) * seqs_.size();
}

void KVCache::truncate(int seq, int n) {
  Seq& s = seqs_.at(seq);
  if (n < 0 || n > s.length) {
    fail<InputError>("KV truncate of sequence {} to {} positions: it holds {}", seq, n, s.length);
  }
  if (!rec_layer_.empty() && n != s.length) {
    if (n == 0) {
      for (auto& st : s.state[s.cur]) std::fill(st.begin(), st.end(), 0.f);
      s.call_base = 0;
    } else {
      MTP_CHECK(n >= s.call_base, "rollback of sequence {} to {} positions: its recurrent state "
                "is kept from position {} on (the start of its last forward call) — a rollback "
                "further back needs a state nobody saved", seq, n, s.call_base);
      replay(seq, n);
    }
  }
  s.length = n;
  s.tree_parent.clear();
  s.tree_pos.clear();
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

bool KVCache::holds(int seq, int layer, int pos) const {
  const Seq& s = seqs_.at(size_t(seq));
  if (pos < 0 || pos >= s.length) return false;
  if (slots(layer) >= ctx_) return true;
  return s.ring_pos[size_t(pos) % size_t(ring_slots_)] == pos;
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
  if (!rec_layer_.empty()) {
    for (size_t r = 0; r < rows.size(); ++r) {
      if (rows[r].node >= 0) {
        fail<InputError>("forward row {}: a tree row, but this model's recurrent layers keep one "
                         "state per sequence and cannot verify draft trees", r);
      }
    }
  }
  // A call replaces the tree of every sequence it has rows for.
  for (const Row& row : rows) {
    seqs_[row.seq].tree_parent.clear();
    seqs_[row.seq].tree_pos.clear();
  }
  try {
    for (const Row& row : rows) {
      if (row.node < 0) {
        if (!seqs_[row.seq].tree_parent.empty()) {
          fail<InputError>("forward row for sequence {} at position {}: ordinary rows must come "
                           "before the sequence's tree rows", row.seq, row.pos);
        }
        begin_write(row.seq, row.pos);
      } else {
        begin_tree_row(row);
      }
    }
  } catch (...) {
    for (const Row& row : rows) {
      abort_write(row.seq);
      seqs_[row.seq].tree_parent.clear();
      seqs_[row.seq].tree_pos.clear();
    }
    throw;
  }
  flip_states(rows);
}

void KVCache::begin_tree_row(const Row& row) {
  Seq& s = seqs_[row.seq];
  const int n = int(s.tree_parent.size());
  if (row.node != n) {
    fail<InputError>("tree row of sequence {}: node {} where node {} comes next (nodes in order "
                     "0, 1, ...)", row.seq, row.node, n);
  }
  if (row.parent < -1 || row.parent >= n) {
    fail<InputError>("tree row of sequence {}: node {} has parent {}; a parent is -1 or an "
                     "earlier node", row.seq, row.node, row.parent);
  }
  if (s.pending + n >= q_max_) {
    fail<InputError>("forward call has more than {} rows for sequence {}", q_max_, row.seq);
  }
  if (n >= tree_slots_) {
    fail<InputError>("tree row of sequence {}: node {}, but this cache holds {} tree rows per "
                     "sequence", row.seq, row.node, tree_slots_);
  }
  const int expect = (row.parent < 0 ? s.length + s.pending - 1 : s.tree_pos[size_t(row.parent)]) + 1;
  if (row.pos != expect) {
    fail<InputError>("tree row of sequence {}: node {} at position {}, its parent's position + 1 "
                     "is {}", row.seq, row.node, row.pos, expect);
  }
  if (row.pos >= ctx_) fail<InputError>("position {} is beyond the context of {} tokens", row.pos, ctx_);
  s.tree_parent.push_back(row.parent);
  s.tree_pos.push_back(row.pos);
}

size_t KVCache::write_slot(const Row& row, int layer) const {
  const size_t n = size_t(slots(layer));
  return row.node < 0 ? size_t(row.pos) % n : n + size_t(row.node);
}

size_t KVCache::tree_key_slots(const Row& row, int layer, bool sliding,
                               std::vector<uint32_t>& out) const {
  const Seq& s = seqs_.at(row.seq);
  MTP_CHECK(row.node >= 0 && row.node < int(s.tree_parent.size()), "row is not a node of the "
            "held tree of sequence {}", row.seq);
  const int64_t pos = row.pos;
  const int64_t lo = sliding && pos + 1 > window_ ? pos + 1 - window_ : 0;
  int depth = 0;
  for (int n = row.node; n >= 0; n = s.tree_parent[size_t(n)]) ++depth;
  const int64_t base = pos - depth;  // the root: the last position before the tree
  const size_t before = out.size(), slots = size_t(this->slots(layer));
  for (int64_t p = lo; p <= base; ++p) out.push_back(uint32_t(size_t(p) % slots));
  // The node and its ancestors inside the window, collected upwards, then
  // put in position order.
  const size_t mark = out.size();
  for (int n = row.node; n >= 0; n = s.tree_parent[size_t(n)]) {
    if (s.tree_pos[size_t(n)] >= lo) out.push_back(uint32_t(slots + size_t(n)));
  }
  std::reverse(out.begin() + std::ptrdiff_t(mark), out.end());
  return out.size() - before;
}

void KVCache::commit_tree(int seq, std::span<const int32_t> path) {
  Seq& s = seqs_.at(seq);
  for (size_t i = 0; i < path.size(); ++i) {
    const int32_t n = path[i];
    if (n < 0 || n >= int32_t(s.tree_parent.size()) ||
        s.tree_parent[size_t(n)] != (i == 0 ? -1 : path[i - 1])) {
      fail<InputError>("KV commit of a tree path of sequence {}: node {} at step {} does not "
                       "continue the path", seq, n, i);
    }
    MTP_CHECK(s.tree_pos[size_t(n)] == s.length + int(i), "tree node {} at position {}, "
              "expected {}", n, s.tree_pos[size_t(n)], s.length + int(i));
  }
  for (size_t l = 0; l < slots_.size(); ++l) {
    const size_t slots = size_t(slots_[l]), dim = size_t(kv_dim_[l]);
    for (size_t i = 0; i < path.size(); ++i) {
      const size_t from = (slots + size_t(path[i])) * dim;
      const size_t to = (size_t(s.length) + i) % slots * dim;
      std::copy_n(s.k[l].data() + from, dim, s.k[l].data() + to);
      std::copy_n(s.v[l].data() + from, dim, s.v[l].data() + to);
    }
  }
  for (size_t i = 0; i < path.size(); ++i) {
    const int p = s.length + int(i);
    if (ring_slots_ > 0) s.ring_pos[size_t(p) % size_t(ring_slots_)] = p;
  }
  s.length += int(path.size());
  s.tree_parent.clear();
  s.tree_pos.clear();
}

void KVCache::flip_states(std::span<const Row> rows) {
  if (rec_layer_.empty()) return;
  for (const Row& row : rows) {
    Seq& s = seqs_[row.seq];
    if (row.pos != s.length) continue;  // not the sequence's first row of this call
    s.call_base = s.length;
    s.cur = 1 - s.cur;  // the old current state becomes the snapshot
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
