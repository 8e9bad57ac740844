#include "tokenizer/sentencepiece_trainer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/setting.h"

namespace mtp::io {
namespace {

// The training lines of the documents, one SentencePiece "sentence" each.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<const std::string*>& docs) {
    for (const std::string* d : docs) {
      std::istringstream in(*d);
      std::string line;
      while (std::getline(in, line)) {
        if (!line.empty()) lines_.push_back(std::move(line));
      }
    }
  }
  bool done() const override { return i_ >= lines_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return lines_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::vector<std::string> lines_;
  size_t i_ = 0;
};

}  // namespace

std::string train_sentencepiece_bpe(const std::vector<const std::string*>& docs, int vocab,
                                    int threads, uint64_t seed, const std::string& corpus) {
  LineIterator it(docs);
  if (it.done()) fail<InputError>("the corpus {} has no text to train a tokenizer on", corpus);
  const std::unordered_map<std::string, std::string> spec = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab)},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "true"},
      {"split_digits", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"max_sentence_length", "65536"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"hard_vocab_limit", "false"},
      {"num_threads", std::to_string(threads)},
      {"minloglevel", "1"}};
  sentencepiece::SetRandomGeneratorSeed(unsigned(seed % 0xfffffffeu));
  std::string proto;
  const auto st = sentencepiece::SentencePieceTrainer::Train(spec, &it, &proto);
  if (!st.ok()) {
    std::string why = st.ToString();
    if (auto p = why.find("] "); p != std::string::npos) why = why.substr(p + 2);
    if (why.find("smaller than required_chars") != std::string::npos) {
      fail_setting<InputError>("vocab", "a vocabulary of {} is too small for the corpus {}: {}",
                               vocab, corpus, why);
    }
    fail<InputError>("training the tokenizer on the corpus {} failed: {}", corpus, why);
  }
  return proto;
}

}  // namespace mtp::io
