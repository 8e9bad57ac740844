// Training a SentencePiece tokenizer (libsentencepiece): what `mtpspec
// pretrain` gives the target it trains. Lives with the tokenizers, the only
// library that links libsentencepiece (mtpspec-train links none).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mtp::io {

// A byte-fallback BPE model of `vocab` pieces trained on the non-empty lines
// of `docs` (<unk> 0, <s> 1, </s> 2, identity normalisation, whitespace kept,
// a dummy prefix, digits split), seeded; returns the serialized .model bytes.
// InputError when the corpus has no text, or the vocabulary is too small for
// it (the message says so), or libsentencepiece refuses; `corpus` names the
// files the documents came from in these messages.
std::string train_sentencepiece_bpe(const std::vector<const std::string*>& docs, int vocab,
                                    int threads, uint64_t seed, const std::string& corpus);

}  // namespace mtp::io
