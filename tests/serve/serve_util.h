// Helpers of the server tests: a byte tokenizer, raw loopback sockets (for
// clients that misbehave on purpose) and reading /metrics.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "serve/engine.h"

namespace mtp::test {

// Token id = byte + 3; ids 0..2 are specials (1 = BOS, added; 2 = EOS unless
// `eos` is false, so that generation can only end at max_tokens or a cancel).
class ByteTokenizer : public io::Tokenizer {
 public:
  explicit ByteTokenizer(bool eos = true) : eos_(eos) {}
  std::vector<int32_t> encode(std::string_view t, bool add_special) const override;
  std::string token_bytes(int32_t id, int32_t) const override;
  int32_t vocab_size() const override { return 259; }
  int32_t bos_id() const override { return 1; }
  bool adds_bos() const override { return true; }
  std::vector<int32_t> eos_ids() const override;
  std::string kind() const override { return "bytes"; }

 private:
  bool eos_;
};

// A TCP socket connected to 127.0.0.1:port (-1 on failure, with a test failure).
int connect_loopback(int port);
// Sends all of `data` (false on failure).
bool send_all(int fd, const std::string& data);
// A POST of a JSON body as one HTTP/1.1 request.
std::string http_post(const std::string& path, const std::string& json_body);

// The value of the sample `series` (name with labels, as printed) in a
// Prometheus text exposition; -1 when absent.
double metric(const std::string& exposition, const std::string& series);

// Calls get() every 20 ms until pred(its result) or `timeout`; returns the last result.
std::string poll_until(const std::function<std::string()>& get,
                       const std::function<bool(const std::string&)>& pred,
                       std::chrono::milliseconds timeout);

// The engine with `parallel` slots and fixed draft lengths (batched: the
// budget off, every request drafts its longest), or with one slot and the
// budget on (as `mtpspec serve --serial` runs it).
std::unique_ptr<serve::Engine> make_engine(bool batched, const model::Model& m,
                                           const io::Tokenizer& tok, ThreadPool* pool,
                                           const drafter::Drafter* drafter, int draft_k,
                                           const std::string& model_id, int ctx, int parallel);

}  // namespace mtp::test
