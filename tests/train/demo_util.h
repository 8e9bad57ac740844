// What the family demos' end-to-end tests share (demo_gemma4_e2e_test.cc,
// demo_qwen35_e2e_test.cc): a corpus written here and the demo's JSON summary.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"

namespace mtp::test {

// English sentences from templates, one to four per document, 1,500
// documents, in dir/corpus.txt (its path returned).
std::string write_demo_corpus(const std::string& dir);

// The summary a `demo --json` run printed (a failure naming `what`, with the
// tail of its stderr, when it failed or printed no JSON).
nlohmann::json demo_summary(const CliResult& r, const std::string& what);

}  // namespace mtp::test
