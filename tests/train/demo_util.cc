#include "demo_util.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

namespace mtp::test {

std::string write_demo_corpus(const std::string& dir) {
  const char* who[] = {"The cat", "A dog", "My friend", "The old man", "Every child",
                       "Our teacher", "The sailor", "A young girl"};
  const char* did[] = {"walked to", "looked at", "talked about", "dreamed of", "ran past",
                       "found", "painted", "remembered"};
  const char* what[] = {"the river.", "a small house.", "the green hill.", "an open door.",
                        "the busy market.", "a quiet garden.", "the long road.", "a red boat."};
  std::mt19937 rng(3);
  std::string text;
  for (int doc = 0; doc < 1500; ++doc) {
    const int n = 1 + int(rng() % 4);
    for (int s = 0; s < n; ++s) {
      text += std::string(s ? " " : "") + who[rng() % 8] + " " + did[rng() % 8] + " " +
              what[rng() % 8];
    }
    text += "\n\n";
  }
  const std::string path = dir + "/corpus.txt";
  std::ofstream(path) << text;
  return path;
}

nlohmann::json demo_summary(const CliResult& r, const std::string& what) {
  EXPECT_EQ(r.status, 0) << what << " failed:\n"
                         << r.err.substr(r.err.size() > 6000 ? r.err.size() - 6000 : 0);
  try {
    return nlohmann::json::parse(r.out);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << what << ": stdout is not JSON (" << e.what() << "):\n" << r.out;
    return nlohmann::json::object();
  }
}

}  // namespace mtp::test
