// Library layers name values, not the CLI's flags (core/setting.h): no string
// literal in src/{core,kernels,io,tokenizer,model,drafter,speculative,measure,
// train} holds "--" followed by a letter. Comments may (they explain the code
// to its readers); a literal reaches users, where the C API and serve have no
// such flags. The front ends name their flags themselves (cli/setting_flags.h).
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace mtp::test {
namespace {

struct Literal {
  int line;          // where it starts
  std::string text;  // its characters as written (escapes not decoded)
};

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The string literals of C++ source text, comments skipped: "...", raw
// R"d(...)d" (with any encoding prefix), and char literals skipped whole (a
// '"' is no string). A ' inside a number (1'000) is a digit separator.
std::vector<Literal> string_literals(const std::string& s) {
  std::vector<Literal> out;
  int line = 1;
  size_t word = std::string::npos;  // start of the identifier or number being read
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\n') ++line;
    if (ident_char(c)) {
      if (word == std::string::npos) word = i;
      if (c != 'R' || i + 1 >= s.size() || s[i + 1] != '"') continue;
      const std::string prefix = s.substr(word, i - word);  // u8, u, U, L or nothing
      if (!(prefix.empty() || prefix == "u8" || prefix == "u" || prefix == "U" || prefix == "L"))
        continue;
      const size_t open = s.find('(', i + 2);
      if (open == std::string::npos) break;
      const std::string end = ")" + s.substr(i + 2, open - i - 2) + "\"";
      const size_t close = s.find(end, open);
      const size_t stop = close == std::string::npos ? s.size() : close;
      out.push_back({line, s.substr(open + 1, stop - open - 1)});
      for (size_t k = i; k < stop; ++k) line += s[k] == '\n';
      i = stop + end.size() - 1;
      word = std::string::npos;
      continue;
    }
    const size_t start = word;
    const bool in_number =
        start != std::string::npos && std::isdigit(static_cast<unsigned char>(s[start]));
    word = std::string::npos;
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      i = s.find('\n', i);
      if (i == std::string::npos) break;
      ++line;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      const size_t end = s.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? s.size() : end + 2;
      for (size_t k = i; k < stop; ++k) line += s[k] == '\n';
      i = stop - 1;
    } else if (c == '"' ||
               (c == '\'' && !(in_number && i + 1 < s.size() && ident_char(s[i + 1])))) {
      const int at = line;
      size_t k = i + 1;
      while (k < s.size() && s[k] != c && s[k] != '\n') k += s[k] == '\\' ? 2 : 1;
      if (c == '"') out.push_back({at, s.substr(i + 1, k - i - 1)});
      i = k < s.size() && s[k] == '\n' ? k - 1 : k;  // unterminated: the newline still counts
    } else if (c == '\'') {
      word = start;  // a digit separator: the number goes on
    }
  }
  return out;
}

bool names_a_flag(const std::string& literal) {
  for (size_t i = 0; i + 2 < literal.size(); ++i) {
    if (literal[i] == '-' && literal[i + 1] == '-' &&
        std::isalpha(static_cast<unsigned char>(literal[i + 2])))
      return true;
  }
  return false;
}

// "file:line: literal" for each literal of `text` that names a flag.
std::vector<std::string> flags_in(const std::string& file, const std::string& text) {
  std::vector<std::string> found;
  for (const Literal& l : string_literals(text)) {
    if (names_a_flag(l.text))
      found.push_back(file + ":" + std::to_string(l.line) + ": \"" + l.text + "\"");
  }
  return found;
}

TEST(NoFlagsInLibraries, TheScannerFindsLiteralsNotComments) {
  const std::string src =
      "// a comment may say --threads\n"
      "/* and so may\n   --tree in a block */\n"
      "int n = 1'000'000; char q = '\"'; char e = '\\'';\n"
      "fail(\"the thread count {}\", n);\n"
      "fail(\"a tree shape \\\"x\\\": pass --tree 2,1\");\n"
      "auto r = R\"x(raw --weights)\" ok)x\";\n"
      "auto s = u8R\"(--top-p)\";\n"
      "auto t = \"a -- b, x--\";  // -- and a letter only: --x\n";
  const std::vector<std::string> found = flags_in("f.cc", src);
  ASSERT_EQ(found.size(), 3u) << testing::PrintToString(found);
  EXPECT_EQ(found[0], "f.cc:6: \"a tree shape \\\"x\\\": pass --tree 2,1\"");
  EXPECT_EQ(found[1], "f.cc:7: \"raw --weights)\" ok\"");
  EXPECT_EQ(found[2], "f.cc:8: \"--top-p\"");
}

TEST(NoFlagsInLibraries, NoLibrarySourceSpellsAFlag) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(MTPSPEC_SOURCE_DIR) / "src";
  ASSERT_TRUE(fs::is_directory(src)) << src;
  std::vector<std::string> found;
  int files = 0;
  for (const char* layer : {"core", "kernels", "io", "tokenizer", "model", "drafter",
                            "speculative", "measure", "train"}) {
    ASSERT_TRUE(fs::is_directory(src / layer)) << src / layer;
    for (const auto& e : fs::recursive_directory_iterator(src / layer)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      ++files;
      for (auto& f : flags_in(fs::relative(e.path(), src.parent_path()).string(), text.str()))
        found.push_back(std::move(f));
    }
  }
  EXPECT_GT(files, 100);
  std::string all;
  for (const auto& f : found) all += "\n  " + f;
  EXPECT_TRUE(found.empty()) << "library layers name values, not flags (core/setting.h): "
                             << found.size() << " literal(s) spell one:" << all;
}

}  // namespace
}  // namespace mtp::test
