// The target an assistant was trained against (drafter::AssistantRecord):
// a directory recording a target's fingerprint loads for that target and is
// refused for another (ConfigError naming both fingerprints) unless the
// policy is warn — the rule K-module drafters follow (check_drafter_target);
// an assistant with no record (Google's) loads; a record naming another
// capture point is refused; llama.cpp's GGUF written from the directory
// (write_assistant_gguf) carries the same record and the same rule.
#include <gtest/gtest.h>

#include "assistant_util.h"
#include "core/error.h"
#include "drafter/assistant_gguf.h"
#include "drafter/gemma4_assistant.h"
#include "model/loader.h"
#include "test_util.h"

namespace mtp::drafter {
namespace {

const std::string kFpA(64, 'a'), kFpB(64, 'b');

test::AssistantSpec recorded(const std::string& fp, const std::string& capture = kAssistantCapture) {
  test::AssistantSpec a;
  a.config_patch = {{kAssistantRecordKey,
                     {{"target_fingerprint", fp}, {"target_architecture", "gemma4"},
                      {"capture", capture}}}};
  return a;
}

std::string refusal(const std::string& path, const model::ModelConfig& target,
                    const ServedTarget& served) {
  try {
    Gemma4Assistant::load(path, target, {}, &served);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

struct Fixture {
  test::RandomSpec t = test::assistant_target_spec();
  model::ModelConfig target = model::load_model(test::random_hf_checkpoint("g4a-rec-t", t), {}).config;
};

TEST(AssistantRecord, RefusesAnotherTargetUnlessWarned) {
  const Fixture f;
  const std::string dir = test::random_assistant("g4a-rec", f.t, recorded(kFpA));
  const std::string gguf = test::temp_dir("g4a-rec-gguf") + "/a.gguf";
  write_assistant_gguf(dir, gguf);
  for (const std::string& path : {dir, gguf}) {
    const ServedTarget same{kFpA, TargetMismatch::Refuse};
    const Gemma4Assistant g = Gemma4Assistant::load(path, f.target, {}, &same);
    EXPECT_EQ(g.record().target_fingerprint, kFpA) << path;
    EXPECT_EQ(g.record().capture, kAssistantCapture) << path;
    const std::string why = refusal(path, f.target, {kFpB, TargetMismatch::Refuse});
    EXPECT_NE(why.find(kFpA), std::string::npos) << path << ": " << why;
    EXPECT_NE(why.find(kFpB), std::string::npos) << path << ": " << why;
    EXPECT_EQ(refusal(path, f.target, {kFpB, TargetMismatch::Warn}), "") << path;
    // Unchecked (training starts from any assistant).
    EXPECT_NO_THROW(Gemma4Assistant::load(path, f.target)) << path;
  }
}

TEST(AssistantRecord, NoRecordIsAccepted) {
  const Fixture f;
  const std::string dir = test::random_assistant("g4a-rec-none", f.t, {});
  const ServedTarget served{kFpB, TargetMismatch::Refuse};
  const Gemma4Assistant g = Gemma4Assistant::load(dir, f.target, {}, &served);
  EXPECT_TRUE(g.record().empty());
  const std::string gguf = test::temp_dir("g4a-rec-none-gguf") + "/a.gguf";
  write_assistant_gguf(dir, gguf);
  EXPECT_TRUE(Gemma4Assistant::load(gguf, f.target, {}, &served).record().empty());
}

TEST(AssistantRecord, RefusesAnotherCapturePoint) {
  const Fixture f;
  const std::string dir = test::random_assistant(
      "g4a-rec-cap", f.t, recorded(kFpA, "residual after the last decoder layer, before the final norm"));
  try {
    Gemma4Assistant::load(dir, f.target);
    FAIL() << "a pre-norm capture record loaded";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("capture"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("before the final norm"), std::string::npos) << e.what();
  }
  const std::string empty = test::random_assistant("g4a-rec-empty", f.t, recorded(""));
  EXPECT_THROW(Gemma4Assistant::load(empty, f.target), FormatError);
}

}  // namespace
}  // namespace mtp::drafter
