#include "train/data.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "core/error.h"

namespace mtp::train {

namespace fs = std::filesystem;

namespace {
uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

ShardSet::ShardSet(const std::string& dir, const std::string& fingerprint, int d_model)
    : dir_(dir), d_(d_model) {
  manifest_ = drafter::read_manifest(dir);
  const std::string fp = manifest_["target_fingerprint"].get<std::string>();
  if (fp != fingerprint) {
    std::string requantized;  // a value of another type is ignored: this only words the error
    if (manifest_.contains("target") && manifest_["target"].is_object() &&
        manifest_["target"].contains("requantized") &&
        manifest_["target"]["requantized"].is_string()) {
      requantized = manifest_["target"]["requantized"].get<std::string>();
    }
    if (!requantized.empty()) {
      // Training runs against the target's stored bytes (its embedding and
      // head, dequantized to fp32 where they are blocks): a requantized copy
      // held only in memory is not a target it can load.
      fail<ConfigError>("shards in '{}' were computed for the target requantized to {} at load "
                        "(precompute holding the weights as {}), target {}; training loads the "
                        "checkpoint as stored, {}. Run `mtpspec precompute` again holding the "
                        "weights as stored (without requantizing), or train against a file that "
                        "stores the quantized weights (a GGUF file)",
                        dir, requantized, requantized, fp, fingerprint);
    }
    fail<ConfigError>("shards in '{}' were computed for target {}; this target is {}. "
                      "Run `mtpspec precompute` with this model", dir, fp, fingerprint);
  }
  seq_len_ = manifest_["seq_len"].get<int>();
  hidden_dtype_ = dtype_from_name(manifest_["hidden_dtype"].get<std::string>());
  if (manifest_["d_model"].get<int>() != d_model) {
    fail<FormatError>("shards in '{}' hold hidden states of width {}; the target's d_model is {}",
                      dir, manifest_["d_model"].get<int>(), d_model);
  }
  for (const auto& s : manifest_["shards"]) {
    const std::string file = s.at("file").get<std::string>();
    const std::string split = s.value("split", std::string("train"));
    if (split != "train" && split != "heldout") {
      fail<FormatError>("manifest of '{}': shard '{}' has split '{}' (train or heldout)", dir,
                        file, split);
    }
    drafter::Shard sh = drafter::read_shard((fs::path(dir) / file).string());
    const auto meta = sh.file.metadata();
    auto it = meta.find("target_fingerprint");
    if (it != meta.end() && it->second != fingerprint) {
      fail<ConfigError>("shard '{}' was computed for target {}; this target is {}", file,
                        it->second, fingerprint);
    }
    if (sh.seq_len != seq_len_ || sh.d_model != d_model || sh.hidden_dtype != hidden_dtype_) {
      fail<FormatError>("shard '{}' is [{}, {}, {}] {}; the manifest says seq_len {}, d {}, {}",
                        file, sh.sequences, sh.seq_len, sh.d_model, dtype_name(sh.hidden_dtype),
                        seq_len_, d_model, dtype_name(hidden_dtype_));
    }
    if (s.contains("sequences") && s["sequences"].get<int>() != sh.sequences) {
      fail<FormatError>("shard '{}' holds {} sequences; the manifest says {}", file,
                        sh.sequences, s["sequences"].get<int>());
    }
    const int idx = int(shards_.size());
    auto& refs = split == "train" ? train_ : held_;
    long& toks = split == "train" ? train_tokens_ : held_tokens_;
    for (int r = 0; r < sh.sequences; ++r) {
      const int len = sh.length[r];
      if (len < 0 || len > seq_len_) {
        fail<FormatError>("shard '{}' sequence {} has length {} (seq_len {})", file, r, len,
                          seq_len_);
      }
      refs.push_back({idx, r});
      toks += len;
    }
    shards_.push_back(std::move(sh));
  }
  if (train_.empty()) fail<InputError>("shards in '{}' hold no training sequences", dir);
}

Batch ShardSet::gather(Split s, const std::vector<size_t>& idx) const {
  const auto& refs = s == Split::Train ? train_ : held_;
  Batch b;
  b.B = int(idx.size());
  b.d = d_;
  for (size_t i : idx) {
    const Ref& r = refs.at(i);
    b.L = std::max(b.L, shards_[size_t(r.shard)].length[r.row]);
  }
  const size_t L = size_t(b.L), d = size_t(d_), T = size_t(seq_len_);
  b.tokens.assign(size_t(b.B) * L, 0);
  b.mask.assign(size_t(b.B) * L, 0);
  b.hidden.assign(size_t(b.B) * L * d, 0.f);
  for (size_t j = 0; j < idx.size(); ++j) {
    const Ref& r = refs[idx[j]];
    const drafter::Shard& sh = shards_[size_t(r.shard)];
    const size_t row = size_t(r.row);
    std::memcpy(b.tokens.data() + j * L, sh.tokens + row * T, L * sizeof(int32_t));
    std::memcpy(b.mask.data() + j * L, sh.loss_mask + row * T, L);
    // One conversion for the sequence's L rows (contiguous in the shard).
    to_f32(sh.hidden + row * T * d * dtype_size(sh.hidden_dtype), sh.hidden_dtype, L * d,
           b.hidden.data() + j * L * d);
    b.real_tokens += sh.length[r.row];
  }
  return b;
}

nlohmann::json ShardSet::trajectory() const { return {{"shards", manifest_["shards"]}}; }

std::pair<std::string, nlohmann::json> ShardSet::record() const {
  return {"shards",
          {{"dir", dir_},
           {"seq_len", seq_len_},
           {"counts", manifest_.value("counts", nlohmann::json())},
           {"corpus", manifest_.value("corpus", nlohmann::json())}}};
}

size_t DataOrder::at(uint64_t gi) {
  if (n_ == 0) fail<InputError>("no training sequences");
  const uint64_t e = gi / n_;
  if (e != cached_epoch_) {
    perm_.resize(n_);
    std::iota(perm_.begin(), perm_.end(), size_t(0));
    uint64_t s = seed_ * 0x2545f4914f6cdd1dull + e * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = n_ - 1; i > 0; --i) {
      const size_t j = size_t(splitmix64(s) % (i + 1));
      std::swap(perm_[i], perm_[j]);
    }
    cached_epoch_ = e;
  }
  return perm_[size_t(gi % n_)];
}

}  // namespace mtp::train
