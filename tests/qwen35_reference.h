// An independent reference of Qwen3.5 for the tests: a scalar double-precision
// decoder written here from the published model (transformers' Qwen3_5TextModel
// with its token-by-token gated delta rule; vLLM's Qwen3.5 MTP head, read not
// copied), taking its hyper-parameters from config.json by transformers' rules
// (Qwen3_5TextConfig) and its weights from the checkpoint's tensors by their
// Hugging Face names — sharing no code with the engine's parsers, loaders,
// forward or cache. The recurrence runs one token at a time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mtp::test {

using Q35Vec = std::vector<double>;

// What the reference takes from config.json.
struct Q35Config {
  int d = 0, L = 0, H = 0, KV = 0, hd = 0, V = 0, ffn = 0, rot = 0;
  int kc = 0, nk = 0, nv = 0, dk = 0, dv = 0;
  double eps = 1e-6, theta = 1e4;
  bool tie = false;
  std::vector<bool> linear;  // per layer
};
Q35Config read_q35_config(const std::string& dir);

// Deliberate errors, for the tests that show each feature matters.
struct Q35Perturb {
  bool plain_norms = false;     // x̂ · w instead of x̂ · (1 + w)
  bool no_gate = false;         // attention output not gated
  bool full_rotation = false;   // every dim of the head rotates
  bool no_conv = false;         // the convolution skipped (its last tap only)
  bool no_decay = false;        // the state is not decayed
  bool tiled_heads = false;     // value head h reads key head h % nk
  bool no_qk_l2norm = false;
};

struct Q35Out {
  std::vector<Q35Vec> hidden, logits;  // per token: pre-norm hidden, logits
  std::vector<Q35Vec> post;            // per token: the hidden after the final norm
  // Per recurrent layer: the state after the last token, [nv · dk · dv].
  std::vector<Q35Vec> states;
};

// The trunk over `toks` from position 0.
Q35Out q35_reference(const std::string& dir, const std::vector<int32_t>& toks,
                     const Q35Perturb& p = {});

// The native MTP head (mtp.*) over rows: row i has position pos0 + i, embeds
// tok[i] and reads hidden[i] ([d], a post-norm hidden); returns each row's
// output after mtp.norm (`out`, the next row's hidden when chaining) and its
// logits. Its own attention caches every row passed, in order.
struct Q35MtpRows {
  std::vector<int32_t> tok;
  std::vector<Q35Vec> hidden;
};
struct Q35MtpOut {
  std::vector<Q35Vec> out, logits;
};
class Q35MtpReference {
 public:
  explicit Q35MtpReference(const std::string& dir);
  ~Q35MtpReference();
  // One row at the next position (positions from 0, consecutive).
  void row(int32_t tok, const Q35Vec& hidden, Q35Vec& out, Q35Vec& logits);
  // Drops the rows from position n on.
  void truncate(int n);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace mtp::test
