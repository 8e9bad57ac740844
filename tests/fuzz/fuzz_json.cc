// The one JSON reader (core/json.h): parse_json on any bytes, then the typed
// accessors on whatever came out. Depth and type confusion are refused as
// FormatErrors; nothing else may escape.
#include "core/json.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  mtp::fuzz::expect_typed([&] {
    const nlohmann::json j = mtp::parse_json(text, "input");
    if (!j.is_object()) return;
    for (const char* k : {"a", "b", "step", "d_model", "shards", "id"}) {
      try {
        (void)mtp::json_find<int32_t>(j, k, "input");
      } catch (const mtp::FormatError&) {
      }
      try {
        (void)mtp::json_value<std::string>(j, k, "", "input");
      } catch (const mtp::FormatError&) {
      }
      try {
        (void)mtp::json_find<nlohmann::json::array_t>(j, k, "input");
      } catch (const mtp::FormatError&) {
      }
    }
    (void)j.dump();  // bounded depth: no recursion past kMaxJsonDepth
  });
  return 0;
}
