#include "io/corpus.h"

#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "io/utf8.h"

namespace mtp::io {

namespace {

std::string sha256(const std::string& s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(s.data(), s.size(), md, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) out += {hex[md[i] >> 4], hex[md[i] & 15]};
  return out;
}

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

}  // namespace

CorpusFile read_corpus(const std::string& path, std::vector<std::string>& docs) {
  std::string data = read_file(path);
  CorpusFile f{path, sha256(data), data.size(), 0};
  if (!is_valid_utf8(data)) {
    // Locate the first bad line for the message (lines are short: cheap).
    size_t pos = 0, line = 1;
    while (pos < data.size()) {
      size_t nl = data.find('\n', pos);
      size_t end = nl == std::string::npos ? data.size() : nl;
      if (!is_valid_utf8(std::string_view(data).substr(pos, end - pos))) break;
      pos = end + 1;
      ++line;
    }
    fail<InputError>("corpus '{}' is not valid UTF-8 (line {})", path, line);
  }
  if (ends_with(path, ".jsonl")) {
    size_t line_no = 0, pos = 0;
    while (pos < data.size()) {
      size_t nl = data.find('\n', pos);
      std::string_view line(data.data() + pos, (nl == std::string::npos ? data.size() : nl) - pos);
      pos = nl == std::string::npos ? data.size() : nl + 1;
      ++line_no;
      if (blank(line)) continue;
      const std::string where = fmt::format("corpus {}:{}", path, line_no);
      const nlohmann::json j = parse_json(line, where);
      if (!j.is_object()) {
        fail<FormatError>("{}: expected an object with a string \"text\" field", where);
      }
      std::string t = json_get<std::string>(j, "text", where);
      if (!blank(t)) docs.push_back(std::move(t)), ++f.documents;
    }
    return f;
  }
  // Plain text: documents are separated by one or more blank lines.
  std::string cur;
  size_t pos = 0;
  auto flush = [&] {
    if (!blank(cur)) docs.push_back(cur), ++f.documents;
    cur.clear();
  };
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    size_t end = nl == std::string::npos ? data.size() : nl;
    std::string_view line(data.data() + pos, end - pos);
    pos = nl == std::string::npos ? data.size() : nl + 1;
    if (blank(line)) {
      flush();
    } else {
      if (!cur.empty()) cur += '\n';
      cur.append(line.data(), line.size());
    }
  }
  flush();
  return f;
}

}  // namespace mtp::io
