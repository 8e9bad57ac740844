// SentencePiece .model through libsentencepiece: the fallback for models the
// native reader (tokenizer_sentencepiece.cc) does not implement — Unigram
// models and normalizers with a precompiled charsmap — and the tests'
// independent reference for the native one. Same contracts as
// SentencePieceTokenizer (tokenizer_sentencepiece.h).
//
// Note: Debian's libsentencepiece bundles protobuf 3.14 and exports its
// symbols; a process that also loads the system libprotobuf (libtorch does)
// crashes at start-up. The project therefore keeps libtorch in a separate
// executable (see CMakeLists.txt).
#include <sentencepiece_processor.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/tokenizer_sentencepiece.h"
#include "tokenizer/tokenizer_text.h"

namespace mtp::io {
namespace {

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581 '▁'

class LibSentencePieceTokenizer final : public Tokenizer {
 public:
  explicit LibSentencePieceTokenizer(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      fail<IoError>("SentencePiece model '{}' does not exist", path);
    }
    const auto st = sp_.Load(path);
    if (!st.ok())
      fail<FormatError>("'{}' is not a valid SentencePiece model: {}", path, st.ToString());
    const int n = sp_.GetPieceSize();
    std::vector<AddedTokenMatcher::Token> specials;
    bytes_.resize(size_t(n));
    for (int id = 0; id < n; ++id) {
      const std::string& piece = sp_.IdToPiece(id);
      if (sp_.IsControl(id)) {
        if (!piece.empty()) specials.push_back({piece, id});
      } else if (sp_.IsUnknown(id)) {
        bytes_[size_t(id)] = " \xE2\x81\x87 ";  // " ⁇ "
        if (!piece.empty()) specials.push_back({piece, id});
      } else if (sp_.IsByte(id)) {
        bytes_[size_t(id)] = std::string(1, char(std::max(0, detail::parse_byte_piece(piece))));
      } else {
        std::string s = piece;
        for (size_t i = s.find(kMetaspace); i != std::string::npos; i = s.find(kMetaspace, i + 1)) {
          s.replace(i, kMetaspace.size(), " ");
        }
        bytes_[size_t(id)] = std::move(s);
      }
    }
    specials_ = std::make_unique<AddedTokenMatcher>(std::move(specials));
    // Whether the model prepends a dummy "▁": the first piece of "a" tells.
    std::vector<std::string> probe;
    if (sp_.Encode("a", &probe).ok() && !probe.empty()) {
      dummy_prefix_ = probe[0].rfind(kMetaspace, 0) == 0;
    }
    bos_ = sp_.bos_id();
    if (sp_.eos_id() >= 0) eos_.push_back(sp_.eos_id());
    const auto cfg = detail::read_tokenizer_config(detail::config_path_for(path));
    if (cfg.add_bos_token) add_bos_ = *cfg.add_bos_token;
    if (cfg.add_eos_token) add_eos_ = *cfg.add_eos_token;
    auto piece_id = [&](const std::string& p) {
      const int id = sp_.PieceToId(p);
      return (id >= 0 && id < n && sp_.IdToPiece(id) == p) ? id : -1;
    };
    if (cfg.bos_token && bos_ < 0) bos_ = piece_id(*cfg.bos_token);
    if (cfg.eos_token) {
      const int id = piece_id(*cfg.eos_token);
      if (id >= 0 && std::find(eos_.begin(), eos_.end(), id) == eos_.end()) eos_.push_back(id);
    }
  }

  std::vector<int32_t> encode(std::string_view text, bool add_special) const override {
    detail::require_valid_utf8(text);
    std::vector<int32_t> out;
    if (add_special && adds_bos()) out.push_back(bos_);
    specials_->encode_around(text, out, [&](std::string_view run, bool) { encode_plain(run, out); });
    if (add_special && add_eos_ && !eos_.empty()) out.push_back(eos_.front());
    return out;
  }

  std::string token_bytes(int32_t id, int32_t prev) const override {
    if (id < 0 || id >= vocab_size()) return std::string(kNoPiece);
    const std::string& b = bytes_[size_t(id)];
    if (dummy_prefix_ && (prev < 0 || prev == bos_) && !b.empty() && b[0] == ' ')
      return b.substr(1);
    return b;
  }

  int32_t vocab_size() const override { return int32_t(bytes_.size()); }
  int32_t bos_id() const override { return bos_; }
  bool adds_bos() const override { return add_bos_ && bos_ >= 0; }
  std::vector<int32_t> eos_ids() const override { return eos_; }
  std::string kind() const override { return "sentencepiece"; }

 private:
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    std::vector<int> ids;
    const auto st = sp_.Encode(text, &ids);
    if (!st.ok()) fail<InputError>("SentencePiece could not encode the input: {}", st.ToString());
    out.insert(out.end(), ids.begin(), ids.end());
  }

  sentencepiece::SentencePieceProcessor sp_;
  std::unique_ptr<AddedTokenMatcher> specials_;
  std::vector<std::string> bytes_;
  int32_t bos_ = -1;
  bool add_bos_ = true, add_eos_ = false, dummy_prefix_ = true;
  std::vector<int32_t> eos_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_libsentencepiece_tokenizer(const std::string& path) {
  return std::make_unique<LibSentencePieceTokenizer>(path);
}

}  // namespace mtp::io
