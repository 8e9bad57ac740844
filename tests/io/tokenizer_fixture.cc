#include "io/tokenizer_fixture.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "test_util.h"

namespace mtp::test {

const io::Tokenizer* shared_tokenizer(const std::string& rel) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<io::Tokenizer>> cache;
  std::lock_guard<std::mutex> lk(mu);
  auto it = cache.find(rel);
  if (it != cache.end()) return it->second.get();
  const std::string path = shared_path(rel);
  if (path.empty()) return nullptr;
  auto tok = io::load_tokenizer(path);
  return cache.emplace(rel, std::move(tok)).first->second.get();
}

const std::vector<std::string>& all_tokenizer_paths() {
  static const std::vector<std::string> paths = {
      "tokenizers/llama2.tokenizer.model", "tokenizers/llama2.tokenizer.json",
      "tokenizers/llama3.tokenizer.json",  "tokenizers/qwen3.tokenizer.json",
      "tokenizers/gemma3.tokenizer.json",  "tokenizers/gpt2.encoder.json",
  };
  return paths;
}

std::string corpus_sample(const std::string& rel, size_t max_bytes) {
  const std::string path = shared_path(rel);
  if (path.empty()) return {};
  std::ifstream f(path, std::ios::binary);
  std::string s(max_bytes, '\0');
  f.read(s.data(), std::streamsize(max_bytes));
  s.resize(size_t(f.gcount()));
  // Drop a partial trailing character.
  size_t cut = s.size();
  while (cut > 0 && (uint8_t(s[cut - 1]) & 0xC0) == 0x80) --cut;
  if (cut > 0 && uint8_t(s[cut - 1]) >= 0xC0) {
    const uint8_t lead = uint8_t(s[cut - 1]);
    const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    if (s.size() - (cut - 1) < need) s.resize(cut - 1);
  }
  return s;
}

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

// llama.cpp's convert script writes each test string followed by
// "\n__ggml_vocab_test__\n" (newer files: between the strings, none after
// the last), and one line of " id id ..." per string to .out.
Vectors read_vectors(const std::string& inp_path, const std::string& out_path) {
  Vectors v;
  const std::string inp = slurp(inp_path), out = slurp(out_path);
  const std::string delim = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < inp.size();) {
    const size_t d = inp.find(delim, pos);
    if (d == std::string::npos) {
      v.inputs.push_back(inp.substr(pos));
      break;
    }
    v.inputs.push_back(inp.substr(pos, d - pos));
    pos = d + delim.size();
  }
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int32_t id;
    while (ls >> id) ids.push_back(id);
    v.ids.push_back(std::move(ids));
  }
  return v;
}

namespace {

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

}  // namespace

void check_vectors(const io::Tokenizer& tok, const std::string& name) {
  MTP_REQUIRE_SHARED(inp, "tokenizer-tests/ggml-vocab-" + name + ".gguf.inp");
  MTP_REQUIRE_SHARED(out, "tokenizer-tests/ggml-vocab-" + name + ".gguf.out");
  const Vectors v = read_vectors(inp, out);
  ASSERT_EQ(v.inputs.size(), v.ids.size()) << name;
  ASSERT_GT(v.inputs.size(), 30u) << "suspiciously few vectors in " << inp;
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    EXPECT_EQ(tok.encode(v.inputs[i], /*add_special=*/false), v.ids[i])
        << name << " vector #" << i << " '" << v.inputs[i]
        << "'\n got:     " << show(tok.encode(v.inputs[i], false))
        << "\n expected:" << show(v.ids[i]);
  }
}

}  // namespace mtp::test
