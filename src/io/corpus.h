// Training corpora: plain text (documents separated by blank lines) and JSON
// Lines (one object per line with a "text" field).
#pragma once
#include <string>
#include <vector>

namespace mtp::io {

struct CorpusFile {
  std::string path;
  std::string sha256;      // of the file's bytes
  size_t bytes = 0;
  size_t documents = 0;
};

// Appends the documents of `path` to docs (whitespace-only documents are
// dropped; invalid UTF-8 is an InputError naming the file and byte offset).
CorpusFile read_corpus(const std::string& path, std::vector<std::string>& docs);

}  // namespace mtp::io
