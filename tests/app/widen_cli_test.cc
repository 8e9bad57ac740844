// `mtpspec widen` through the binary: the golden greedy text of stories260K
// from the widened folder (its tokenizer and stop rule found there, its
// drafter beside it), and bad shapes refused with exit status 2.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_util.h"
#include "core/mapped_file.h"
#include "test_util.h"

namespace mtp::test {
namespace {

TEST(WidenCli, WidenedStories260KGeneratesTheGoldenText) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(expected_path, "models/stories260K/greedy-200.expected.txt");
  const std::string dir = temp_dir("widen-cli");
  const std::string drafter = dir + "/random-drafter.safetensors";
  CliResult i = run_cli("init-drafter -m " + shell_quote(model) + " -o " + shell_quote(drafter) +
                        " --k 2");
  ASSERT_EQ(i.status, 0) << i.err;
  const std::string out = dir + "/wide";
  CliResult w = run_cli("widen -m " + shell_quote(model) + " --drafter " + shell_quote(drafter) +
                        " --shape d_model=256,layers=6,ffn=512,heads=16,kv_heads=8 --dtype fp32 -o " +
                        shell_quote(out));
  ASSERT_EQ(w.status, 0) << w.err;
  EXPECT_NE(w.out.find("within rounding"), std::string::npos) << w.out;  // the RoPE layout
  ASSERT_TRUE(std::filesystem::exists(out + "/drafter.safetensors"));
  ASSERT_TRUE(std::filesystem::exists(out + "/tokenizer.bin"));
  // The reference runner's greedy text, byte for byte, plain and speculative
  // (the drafter is found beside the model).
  const std::string expected = read_file(expected_path);
  CliResult g = run_cli("generate -m " + shell_quote(out) + " -p '' -n 200 --temp 0 --threads 1");
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_EQ(g.out, expected);
  CliResult s = run_cli("generate -m " + shell_quote(out) + " --drafter " +
                        shell_quote(out + "/drafter.safetensors") +
                        " -p '' -n 200 --temp 0 --threads 1");
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_EQ(s.out, expected);
  // The drafter widened into Q8_0 blocks (--drafter-dtype): still the golden text.
  const std::string outq = dir + "/wide-q8";
  CliResult wq = run_cli("widen -m " + shell_quote(model) + " --drafter " + shell_quote(drafter) +
                         " --shape d_model=256,layers=6,ffn=512,heads=16,kv_heads=8 --dtype fp32 "
                         "--drafter-dtype q8_0 -o " + shell_quote(outq));
  ASSERT_EQ(wq.status, 0) << wq.err;
  EXPECT_NE(read_file(outq + "/drafter.safetensors").find("\"quantized\""), std::string::npos);
  CliResult sq = run_cli("generate -m " + shell_quote(outq) + " -p '' -n 200 --temp 0 --threads 1 "
                         "--no-gate");
  ASSERT_EQ(sq.status, 0) << sq.err;
  EXPECT_EQ(sq.out, expected);
}

TEST(WidenCli, BadShapesExitWithStatus2) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string out = temp_dir("widen-cli-bad") + "/x";
  struct Case {
    const char* shape;
    const char* needle;
  } cases[] = {{"d_model=32", "narrower"},
               {"layers=4", "narrower"},
               {"d_model=128", "--allow-inexact"},
               {"heads=8,kv_heads=8", "kv heads"},
               {"d_model=1024,head_dim=16", "head_dim"},
               {"depth=3", "unknown key"}};
  for (const Case& c : cases) {
    CliResult r = run_cli("widen -m " + shell_quote(model) + " --shape " + c.shape + " -o " +
                          shell_quote(out));
    EXPECT_EQ(r.status, 2) << c.shape << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.shape << ": " << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(out));  // refused before anything is written
}

}  // namespace
}  // namespace mtp::test
