#include "drafter/draft_vocab.h"

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "core/error.h"
#include "core/setting.h"
#include "drafter/shards.h"

namespace mtp::drafter {

namespace fs = std::filesystem;

DraftVocab top_tokens(const std::vector<long>& counts, int n) {
  if (n < 1) fail<InputError>("draft vocabulary size must be >= 1, got {}", n);
  std::vector<int32_t> order(counts.size());
  std::iota(order.begin(), order.end(), 0);
  // Most frequent first; equal counts by lower id (a total order: deterministic).
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return counts[size_t(a)] > counts[size_t(b)]; });
  DraftVocab dv;
  for (long c : counts) {
    dv.labels += c;
    dv.distinct += c > 0;
  }
  for (size_t i = 0; i < order.size() && i < size_t(n) && counts[size_t(order[i])] > 0; ++i) {
    dv.ids.push_back(order[i]);
    dv.covered += counts[size_t(order[i])];
  }
  std::sort(dv.ids.begin(), dv.ids.end());
  return dv;
}

DraftVocab choose_draft_vocab(const std::string& dir, int vocab, int n) {
  if (n < 1) {
    fail_setting<InputError>("draft_vocab", "a draft vocabulary needs >= 1 tokens, got {}", n);
  }
  const nlohmann::json man = read_manifest(dir);
  std::vector<long> counts(size_t(vocab), 0);
  for (const auto& s : man.at("shards")) {
    if (s.value("split", std::string("train")) != "train") continue;
    const std::string file = s.at("file").get<std::string>();
    const Shard sh = read_shard((fs::path(dir) / file).string());
    for (int q = 0; q < sh.sequences; ++q) {
      const size_t base = size_t(q) * size_t(sh.seq_len);
      for (int t = 0; t < sh.length[q]; ++t) {
        if (!sh.loss_mask[base + size_t(t)]) continue;
        const int32_t tok = sh.tokens[base + size_t(t)];
        if (tok < 0 || tok >= vocab) {
          fail<FormatError>("shard '{}' sequence {} position {}: token {} outside the "
                            "vocabulary [0, {})", file, q, t, tok, vocab);
        }
        ++counts[size_t(tok)];
      }
    }
  }
  if (std::accumulate(counts.begin(), counts.end(), 0L) == 0) {
    fail<InputError>("shards in '{}' hold no training labels to choose a draft vocabulary from",
                     dir);
  }
  return top_tokens(counts, n);
}

}  // namespace mtp::drafter
