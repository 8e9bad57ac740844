#include "speculative/scheduler/params.h"

#include <algorithm>

#include "core/error.h"
#include "core/memory_headroom.h"
#include "drafter/drafter.h"
#include "model/kv_cache.h"

namespace mtp::speculative {

namespace {
constexpr double kKvBudgetBytes = 8.0 * (1ull << 30);  // default-context memory cap
}  // namespace

std::vector<int32_t> stop_token_ids(const model::ModelConfig& c, const io::Tokenizer* tok) {
  std::vector<int32_t> ids = c.eos_ids;
  if (tok) {
    for (int32_t e : tok->eos_ids()) ids.push_back(e);
  }
  if (c.source == "llama2c") ids.push_back(c.bos_id >= 0 ? c.bos_id : 1);  // run.c stops on BOS
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

int resolve_ctx(const model::ModelConfig& c, int requested, int64_t needed) {
  if (requested < 0) fail<InputError>("the context must be positive, got {}", requested);
  if (requested > c.max_position) {
    fail<InputError>("a context of {} positions exceeds the model's maximum of {}", requested,
                     c.max_position);
  }
  const MemoryHeadroom room = memory_headroom();
  const double avail = room.bytes;
  if (requested > 0) {
    if (room.known() && slot_bytes(c, requested) > avail) {
      fail<InputError>("a context of {} positions needs {:.2f} GiB for the KV cache; {} is "
                       "available", requested, slot_bytes(c, requested) / (1ull << 30),
                       room.describe());
    }
    return requested;
  }
  // Default: what this generation can use (prompt + new tokens + drafts), at
  // most the model's maximum and the longest context within a memory budget
  // — never the model's maximum up front (max_position_embeddings may be 1 M
  // or 2^31 - 1). slot_bytes grows with ctx: the longest is a bisection.
  const double budget = room.known() ? std::min(kKvBudgetBytes, avail / 2) : kKvBudgetBytes;
  int64_t lo = std::min(256, c.max_position), hi = c.max_position;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (slot_bytes(c, int(mid)) <= budget) lo = mid; else hi = mid - 1;
  }
  int64_t ctx = lo;
  if (needed > 0) ctx = std::min(ctx, needed);
  return int(ctx);
}

double slot_bytes(const model::ModelConfig& c, int ctx, const drafter::Drafter* d) {
  double bytes = double(model::KVCache::bytes_for(c, 1, ctx)) +
                 double(ctx) * c.d_model * sizeof(float);  // captured hidden rows
  if (d) {
    bytes += double(d->config().K) * (double(model::KVCache::bytes_for(d->block_config(), 1, ctx)) +
                                      double(ctx) * c.d_model * sizeof(float));
  }
  return bytes;
}

int resolve_n_new(int max_tokens, int prompt_tokens, int ctx) {
  const int room = std::max(0, ctx - prompt_tokens);
  return max_tokens > 0 ? std::min(max_tokens, room) : room;
}

int resolve_draft_k(int requested, int k_max, const char* what) {
  if (requested == 0) return k_max;
  if (requested < 1 || requested > k_max) {
    fail<InputError>("draft length {} is outside 1..{} ({})", requested, k_max, what);
  }
  return requested;
}

}  // namespace mtp::speculative
