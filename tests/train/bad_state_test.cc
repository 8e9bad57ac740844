// A checkpoint state or a metrics.jsonl line with a wrong type (issue 60):
// `"step": "x"` made `train --resume` exit 4 ("a bug") through a nlohmann
// type_error. Now a FormatError naming the file, the field and the value.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "test_util.h"
#include "train/checkpoint.h"

namespace mtp::train {
namespace {

using nlohmann::json;

Checkpoint tiny_checkpoint(json state) {
  Checkpoint c;
  c.state = std::move(state);
  c.params = c.adam_m = c.adam_v = {0.f, 1.f};
  return c;
}

TEST(BadCheckpointState, WrongTypesNameTheFieldAndValue) {
  const std::string dir = test::temp_dir("bad-state");
  const std::string p = dir + "/checkpoint.safetensors";
  const json good = {{"format", kCheckpointFormat}, {"step", 3}, {"total_steps", 9},
                     {"trajectory", {{"lr", 0.1}}},
                     {"layout", {{{"name", "w"}, {"offset", 0}, {"shape", {2}}}}}};
  save_checkpoint(p, tiny_checkpoint(good));
  EXPECT_EQ(load_checkpoint(p).state["step"], 3);
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> says;
  };
  for (const Case& c : std::vector<Case>{
           {[](json& s) { s["step"] = "x"; }, {"step", "\"x\""}},
           {[](json& s) { s["total_steps"] = json::array(); }, {"total_steps"}},
           {[](json& s) { s["trajectory"] = 5; }, {"trajectory", "5"}},
           {[](json& s) { s["layout"][0]["offset"] = "0"; }, {"layout[0]", "offset"}},
           {[](json& s) { s["layout"][0]["shape"] = {"2"}; }, {"layout[0]", "shape"}},
           {[](json& s) { s["target"] = {{"path", 7}}; }, {"target", "path", "7"}}}) {
    json s = good;
    c.edit(s);
    save_checkpoint(p, tiny_checkpoint(s));
    std::vector<std::string> parts = c.says;
    parts.push_back(p);
    try {
      load_checkpoint(p);
      ADD_FAILURE() << "accepted " << s.dump();
    } catch (const FormatError& e) {
      for (const auto& w : parts) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  }
}

TEST(BadCheckpointState, AMistypedMetricsLineOnResumeNamesTheLine) {
  const std::string dir = test::temp_dir("bad-metrics");
  const std::string p = dir + "/metrics.jsonl";
  std::ofstream(p) << "{\"step\": 1, \"loss\": 2}\n{\"step\": \"x\"}\n";
  test::expect_error<FormatError>([&] { open_metrics(p, 5, /*resumed=*/true); },
                                  {p + ":2", "step", "\"x\""});
  // A line cut by a kill is still dropped, not an error.
  std::ofstream(p, std::ios::trunc) << "{\"step\": 1}\n{\"step\": 2, \"lo";
  open_metrics(p, 5, /*resumed=*/true);
}

}  // namespace
}  // namespace mtp::train
