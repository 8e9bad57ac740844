// Per-sequence key/value cache with explicit length control.
//
// Only layers that own their K/V (LayerKind::owns_kv) have storage; a layer
// reading another's K/V (Gemma 4's shared layers) addresses its owner's
// storage through every accessor below, so the cache holds exactly the
// owner layers, each at its own width (kv heads × head_dim).
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
//
// Recurrent layers (LayerKind::recurrent, model/delta_rule.h) keep no K/V but
// a state per sequence: two buffers [v_heads, k_dim, v_dim] — the state after
// length() positions, and the state at the start of the sequence's last
// forward call (its snapshot: the call's first row reads it and writes the
// other buffer, later rows update that one in place, so no copy is made) —
// and a ring of the conv inputs and gates (g, beta) of the last
// q_max + conv_kernel - 1 positions. truncate(seq, n) inside the last call
// (n >= its first position) restores the state after n positions exactly:
// from the snapshot, the rows up to n replayed token by token through the
// same functions the forward ran (model/delta_rule.h), reading the ring — the
// bits k + 1 one-token steps leave. A rollback to 0 resets the state; any
// other rollback before the last call is a bug in the caller (MTP_CHECK).
// Such a model verifies no trees (Model::verifies_trees): tree rows are
// refused.
//
// Tree rows (draft trees, docs/ARCHITECTURE.md "Draft trees"): a row with
// node >= 0 is node `node` of a tree that continues its sequence. Siblings share
// a position, so tree rows are not written at their positions but in tree slots
// (q_max per sequence and layer, after the position slots): node i in slot
// slots(layer) + i. In one call a sequence's ordinary rows come first, then its
// tree nodes 0, 1, 2, ... (parent < node; parent -1 = the sequence's last
// position after the ordinary rows); a node's position is its parent's + 1.
// A tree row attends to the sequence's positions up to its root's and to its
// own ancestors and itself, keys in position order (tree_key_slots) — the key
// set and order of decoding its path one row at a time. Tree rows do not change
// length(); the tree is held until the sequence's next forward call, truncate
// or commit_tree, which moves the K/V of an accepted path into place (bit
// copies) and drops the rest.
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
  int32_t node = -1;    // >= 0: a tree row, node index of this call's tree (see above)
  int32_t parent = -1;  // tree rows: the parent node (-1 = the sequence's last position)
};

class KVCache {
 public:
  // ctx: maximum positions per sequence. q_max: maximum rows of one sequence in
  // one forward call. tree_slots: tree rows per sequence and call (-1 = q_max;
  // 0 = no trees: a cache that only ever holds chains, e.g. the scheduler's).
  KVCache(const ModelConfig& cfg, int n_seq, int ctx, int q_max = 64, int tree_slots = -1);

  int n_seq() const { return int(seqs_.size()); }
  int ctx() const { return ctx_; }
  int q_max() const { return q_max_; }
  int length(int seq) const { return seqs_.at(seq).length; }
  void truncate(int seq, int n);
  size_t bytes() const;
  // The bytes KVCache(c, n_seq, ctx, q_max, tree_slots).bytes() gives,
  // without allocating (the memory estimates): K and V for the attention
  // layers that own theirs (full: ctx slots, sliding: a ring of
  // min(ctx, window + q_max)), plus tree_slots each; the recurrent storage
  // for the Gated DeltaNet layers, which hold no K/V.
  static size_t bytes_for(const ModelConfig& c, int n_seq, int ctx, int q_max = 64,
                          int tree_slots = -1);
  // Bytes of one sequence's recurrent storage (states, snapshots, rings) in
  // a cache of q_max rows per call for config c; of this cache's.
  static size_t recurrent_bytes(const ModelConfig& c, int q_max);
  size_t recurrent_bytes_per_seq() const;

  // Recurrent layers. The conv weights a rollback's replay needs, [conv_dim,
  // conv_kernel] per layer (null for the others): Model::make_cache binds
  // them; a cache without them refuses a rollback that must replay.
  void bind_conv_weights(std::vector<const float*> per_layer) { conv_w_ = std::move(per_layer); }
  bool has_recurrent() const { return !rec_layer_.empty(); }
  // The state after the sequence's rows so far ([v_heads · k_dim · v_dim]):
  // what a call's rows write.
  float* rec_state(int seq, int layer);
  // The state row `row` starts from: the snapshot for the first row of its
  // sequence in this call, else rec_state.
  const float* rec_source(const Row& row, int layer) const;
  // The ring slots of position pos: its conv input [conv_dim] and its gates
  // [2 · v_heads] (g, beta); conv_input is null for pos < 0.
  float* conv_input(int seq, int layer, int pos);
  const float* conv_input(int seq, int layer, int pos) const;
  float* gates(int seq, int layer, int pos);
  // The first position of the sequence's last forward call.
  int call_base(int seq) const { return seqs_.at(seq).call_base; }
  // Diagnostic fault for the rollback tests only: every replay runs `rows`
  // more rows (negative: fewer) than the rollback asks for — the planted
  // off-by-one in the snapshot index they must detect.
  void inject_replay_fault(int rows) { replay_fault_ = rows; }

  // [slots(layer) + tree_slots(), kv_dim(layer)] storage of K and V for
  // (seq, layer) — the owner's for a layer reading another's K/V: the
  // position slots, then the tree slots.
  float* k(int seq, int layer) { return seqs_[seq].k[size_t(store_[size_t(layer)])].data(); }
  float* v(int seq, int layer) { return seqs_[seq].v[size_t(store_[size_t(layer)])].data(); }
  // Read-only views of the same storage, for readers that attend with a
  // sequence's K/V in place and write none (Gemma 4's assistant).
  const float* k(int seq, int layer) const {
    return seqs_.at(size_t(seq)).k[size_t(store_[size_t(layer)])].data();
  }
  const float* v(int seq, int layer) const {
    return seqs_.at(size_t(seq)).v[size_t(store_[size_t(layer)])].data();
  }
  // Whether position `pos` (< length(seq)) still has its K/V in layer
  // `layer`'s slot pos % slots(layer): always for a full layer, for a
  // sliding layer's ring while no later position overwrote it.
  bool holds(int seq, int layer, int pos) const;
  int slots(int layer) const { return slots_[size_t(store_[size_t(layer)])]; }
  int kv_dim(int layer) const { return kv_dim_[size_t(store_[size_t(layer)])]; }
  // Layers with storage (the K/V owners).
  int stored_layers() const { return int(slots_.size()); }
  int tree_slots() const { return tree_slots_; }
  // Where a row's K/V is written in layer `layer`: its position's slot, or
  // its tree slot.
  size_t write_slot(const Row& row, int layer) const;

  // The tree of `seq`'s last forward call (0 nodes when none is held).
  int tree_size(int seq) const { return int(seqs_.at(seq).tree_parent.size()); }
  int tree_parent(int seq, int node) const { return seqs_.at(seq).tree_parent.at(node); }
  int tree_pos(int seq, int node) const { return seqs_.at(seq).tree_pos.at(node); }
  // The slots of the keys tree row `row` attends to in layer `layer`, in
  // position order: positions lo .. (its root's position) in their slots, then
  // its ancestors and itself in tree slots; lo = 0, or pos + 1 - window for a
  // sliding layer. Appends to `out`; returns the count.
  size_t tree_key_slots(const Row& row, int layer, bool sliding, std::vector<uint32_t>& out) const;
  // Makes the tree path `path` (node indices from a child of the root down,
  // each the parent of the next) the sequence's next positions: its K/V are
  // copied into their position slots in every layer, length() grows by
  // path.size(), and the tree is dropped. An empty path just drops it.
  void commit_tree(int seq, std::span<const int32_t> path);

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
    int call_base = 0;  // length when the last call with rows for it began
    int cur = 0;        // recurrent layers: the buffer holding the current state
    std::vector<std::vector<float>> state[2];  // [recurrent layers][v_heads·k_dim·v_dim]
    std::vector<std::vector<float>> ring;      // [recurrent layers][rec_ring · (conv_dim + 2·v_heads)]
    std::vector<std::vector<float>> k, v;  // [stored layers]
    std::vector<int32_t> ring_pos;  // position held by each ring slot (-1 none)
    std::vector<int32_t> tree_parent, tree_pos;  // [nodes] of the held tree
  };
  // Validates and records tree row `row` (called by begin_rows after the
  // ordinary rows of its sequence).
  void begin_tree_row(const Row& row);
  // Recurrent layers, at the start of a call: each sequence with rows keeps
  // its current state as the snapshot and writes the other buffer.
  void flip_states(std::span<const Row> rows);
  // Recurrent layers: the state after n positions (call_base <= n < length),
  // replayed from the snapshot into the current buffer.
  void replay(int seq, int n);
  float* ring_row(int seq, int layer, int pos, size_t offset);
  int ctx_, q_max_, tree_slots_, ring_slots_ = 0, window_ = 0;
  std::vector<int> store_;            // [n_layers] the storage index of the layer's K/V owner
  std::vector<int> slots_, kv_dim_;   // [stored layers]
  std::vector<Seq> seqs_;
  // Recurrent layers: [n_layers] index into Seq::state/ring (-1: not
  // recurrent), their shape, the ring's slots and row width.
  std::vector<int> rec_index_;
  std::vector<int> rec_layer_;        // [recurrent layers] the layer
  LinearAttn linear_;
  int rec_ring_ = 0;
  size_t ring_row_ = 0;
  std::vector<const float*> conv_w_;  // [n_layers]
  int replay_fault_ = 0;
};

}  // namespace mtp::model
