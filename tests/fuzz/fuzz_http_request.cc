// OpenAI request bodies (serve::parse_request) and the chat formatters over
// whatever messages parse. Byte 0 picks the endpoint (even: completions, odd:
// chat); the rest is the body. The contract: an ApiError with status 400, or
// a request whose every field is in range; rendering refuses only with an
// InputError.
#include <cmath>
#include <cstdlib>

#include "fuzz_util.h"
#include "serve/api.h"
#include "serve/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using namespace mtp::serve;
  const Endpoint ep = data[0] % 2 ? Endpoint::Chat : Endpoint::Completions;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  ApiRequest r;
  try {
    r = parse_request(body, ep);
  } catch (const ApiError& e) {
    if (e.status != 400) std::abort();
    (void)error_body(e).dump();
    return 0;
  }
  const auto& s = r.sampling;
  if (!(s.temperature >= 0 && s.temperature <= 2) || !(s.top_p > 0 && s.top_p <= 1) ||
      s.top_k < 0 || !(s.min_p >= 0 && s.min_p < 1) || r.max_tokens < 0) {
    std::abort();
  }
  if (ep == Endpoint::Chat) {
    if (r.messages.empty()) std::abort();
    for (ChatFormat f : {ChatFormat::Llama3, ChatFormat::ChatML, ChatFormat::Gemma,
                         ChatFormat::Llama2, ChatFormat::Mistral, ChatFormat::Gemma4,
                         ChatFormat::Qwen35, ChatFormat::Plain}) {
      ChatTemplate t;
      t.format = f;
      t.bos = "<s>";
      t.eos = "</s>";
      t.strip_think = true;
      mtp::fuzz::expect_typed([&] { (void)t.render(r.messages, r.extras); });
    }
  }
  return 0;
}
