#include "tokenizer/tokenizer_bpe.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "core/error.h"

namespace mtp::io {
namespace {

struct InverseTable {
  std::unordered_map<uint32_t, uint8_t> map;
  InverseTable() {
    const auto& t = byte_to_unicode();
    for (int b = 0; b < 256; ++b) map.emplace(t[size_t(b)], uint8_t(b));
  }
};

}  // namespace

void PairTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap <<= 1;
  slots_.assign(cap, Entry{kEmpty, 0, 0});
  size_ = 0;
}

void PairTable::insert_or_assign(uint64_t key, int32_t rank, int32_t merged) {
  if (2 * (size_ + 1) > slots_.size()) {
    std::vector<Entry> old = std::move(slots_);
    reserve(old.size());  // doubles: capacity >= 2 * old.size()
    for (const Entry& e : old) {
      if (e.key != kEmpty) insert_or_assign(e.key, e.rank, e.merged);
    }
  }
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
    if (slots_[i].key == kEmpty) {
      slots_[i] = {key, rank, merged};
      ++size_;
      return;
    }
    if (slots_[i].key == key) {
      slots_[i].rank = rank;
      slots_[i].merged = merged;
      return;
    }
  }
}

const PairTable::Entry* PairTable::find(uint64_t key) const {
  if (slots_.empty()) return nullptr;
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
    if (slots_[i].key == key) return &slots_[i];
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

const std::array<uint32_t, 256>& byte_to_unicode() {
  // Printable Latin-1 bytes map to themselves; the rest (controls, space, DEL,
  // NBSP, soft hyphen) to U+0100 onwards, in byte order. Same as GPT-2's
  // bytes_to_unicode(), which every byte-level vocabulary is written in.
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      t[b] = printable ? b : 256 + n++;
    }
    return t;
  }();
  return table;
}

std::optional<std::string> byte_level_decode(std::string_view token) {
  static const InverseTable inv;
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    if (detail::utf8_len_at(token, i) == 0) return std::nullopt;
    const uint32_t cp = detail::next_codepoint(token, i);
    auto it = inv.map.find(cp);
    if (it == inv.map.end()) return std::nullopt;
    out += char(it->second);
  }
  return out;
}

BpeModel::BpeModel(Options opts, detail::StringMap<int32_t> vocab, const std::vector<Merge>& merges,
                   const std::string& source)
    : opts_(opts), vocab_(std::move(vocab)) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t ia = find(a), ib = find(b);
    const int32_t im = find(a + b);
    if (ia < 0 || ib < 0 || im < 0) {
      fail<FormatError>("{}: merge #{} ('{}' + '{}') uses a token missing from the vocabulary",
                        source, rank, a, b);
    }
    // A repeated pair keeps its last rank: HF collects merges into a HashMap.
    merges_.insert_or_assign(PairTable::key(ia, ib), int32_t(rank), im);
  }
  for (int b = 0; b < 256; ++b) {
    if (opts_.byte_level) {
      byte_ids_[size_t(b)] = find(std::string(1, char(b)));
    } else {
      byte_ids_[size_t(b)] = opts_.byte_fallback ? find(fmt::format("<0x{:02X}>", b)) : -1;
    }
  }
}

int32_t BpeModel::find(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::initial_symbols(std::string_view word, std::vector<Symbol>& syms) const {
  auto push = [&](int32_t id) { syms.push_back({id, int32_t(syms.size()) - 1, -1}); };
  bool last_unk = false;
  auto push_unk = [&] {
    if (opts_.unk_id < 0) return;  // no unk token: the character is dropped
    if (opts_.fuse_unk && last_unk) return;
    push(opts_.unk_id);
    last_unk = true;
  };
  if (opts_.byte_level) {
    for (char c : word) {
      const int32_t id = byte_ids_[uint8_t(c)];
      if (id >= 0) {
        push(id);
        last_unk = false;
      } else {
        push_unk();
      }
    }
  } else {
    for (size_t i = 0; i < word.size();) {
      size_t n = detail::utf8_len_at(word, i);
      if (n == 0) n = 1;  // cannot happen after validation; stay total anyway
      const int32_t id = find(word.substr(i, n));
      if (id >= 0) {
        push(id);
        last_unk = false;
      } else {
        bool all = opts_.byte_fallback;
        for (size_t k = 0; all && k < n; ++k) all = byte_ids_[uint8_t(word[i + k])] >= 0;
        if (all) {
          for (size_t k = 0; k < n; ++k) push(byte_ids_[uint8_t(word[i + k])]);
          last_unk = false;
        } else {
          push_unk();
        }
      }
      i += n;
    }
  }
  for (size_t k = 0; k + 1 < syms.size(); ++k) syms[k].next = int32_t(k + 1);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (opts_.ignore_merges) {
    const int32_t id = find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  initial_symbols(word, syms);
  if (syms.size() > 1) {
    // Min-heap of (rank << 32 | pos): lowest rank first, leftmost on ties.
    // Entries are 8 bytes (long words make the heap large and memory-bound);
    // an entry is stale when the pair now at `pos` has another rank, which
    // identifies the pair uniquely.
    std::vector<uint64_t> heap;
    heap.reserve(syms.size());
    auto key = [](int32_t rank, int32_t pos) {
      return (uint64_t(uint32_t(rank)) << 32) | uint32_t(pos);
    };
    auto rank_at = [&](int32_t pos, int32_t* merged) {
      const Symbol& s = syms[size_t(pos)];
      if (s.id < 0 || s.next < 0) return -1;
      const PairTable::Entry* e = merges_.find(PairTable::key(s.id, syms[size_t(s.next)].id));
      if (!e) return -1;
      *merged = e->merged;
      return e->rank;
    };
    int32_t merged = -1;
    for (size_t k = 0; k + 1 < syms.size(); ++k) {
      if (const int32_t r = rank_at(int32_t(k), &merged); r >= 0)
        heap.push_back(key(r, int32_t(k)));
    }
    const std::greater<uint64_t> later;
    std::make_heap(heap.begin(), heap.end(), later);
    auto consider = [&](int32_t pos) {
      if (pos < 0) return;
      if (const int32_t r = rank_at(pos, &merged); r >= 0) {
        heap.push_back(key(r, pos));
        std::push_heap(heap.begin(), heap.end(), later);
      }
    };
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      const uint64_t top = heap.back();
      heap.pop_back();
      const auto pos = int32_t(uint32_t(top));
      if (rank_at(pos, &merged) != int32_t(top >> 32)) continue;  // stale
      Symbol& s = syms[size_t(pos)];
      Symbol& r = syms[size_t(s.next)];
      s.id = merged;
      s.next = r.next;
      if (r.next >= 0) syms[size_t(r.next)].prev = pos;
      r.id = -1;  // dead
      consider(s.prev);
      consider(pos);
    }
  }
  for (int32_t k = syms.empty() ? -1 : 0; k >= 0; k = syms[size_t(k)].next)
    out.push_back(syms[size_t(k)].id);
}

}  // namespace mtp::io
