// Token selection from one row of logits, at temperature 0 and above.
//
// Temperature 0: argmax, ties to the lowest index — the same rule everywhere
// (verify's accept test compares drafts with exactly this choice).
//
// Temperature > 0, one order, applied identically to the target's logits and
// to each drafter module's: divide by the temperature; keep the top-k (0 =
// off; ties to the lower id); keep the smallest set of the most probable with
// probability >= top-p (1 = off); drop tokens below min-p × the largest
// probability (0 = off); renormalise. Then the token at sequence position t
// (the index it will have in the sequence) is the Gumbel-max over the kept
// candidates: argmax_i log p_i + g(seed, t, id_i), where g is Gumbel noise that
// is a pure function of (seed, t, token id) — a counter-based hash, no
// sequential RNG state. So the draw does not depend on how position t was
// reached (a one-token decode, a verify row, a row of another sequence in the
// same forward), and because verify rows are bit-identical to decode rows,
// speculative sampling gives the tokens plain sampling gives for the same
// seed ("coupled" sampling), while each token is an exact sample of the kept
// distribution (Gumbel-max). Noise is drawn only for kept candidates (without
// truncation the whole vocabulary: one hash each), and the two logs of the
// Gumbel score only for candidates whose bound can still win (sampler.cc,
// skip_bar) — the same argmax as scoring them all.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mtp::speculative {

struct SamplerOptions {
  float temperature = 0.f;  // 0 = greedy
  int top_k = 0;            // 0 = off
  float top_p = 1.f;        // nucleus mass in (0, 1]; 1 = off
  float min_p = 0.f;        // in [0, 1); 0 = off
  uint64_t seed = 0;
  // Tests only: draw the noise from a per-Sampler counter instead of the
  // token's position (a sequential RNG), the variant the coupled-identity test
  // must catch. Never set outside tests.
  bool sequential_noise_fault = false;
  // Tests only: score every kept candidate (no skip bar, sampler.cc), the
  // reference the pruned scoring must equal choice for choice.
  bool score_every_candidate = false;

  bool greedy() const { return temperature == 0.f; }
  // InputError naming the option and value: temperature finite and >= 0,
  // top-k >= 0, top-p in (0, 1], min-p in [0, 1), nothing NaN.
  void validate() const;
};

// How speculation keeps sampling lossless at temperature > 0.
enum class SpecSampling {
  // Drafts and the target's choices use the same keyed noise; a draft is
  // accepted when it equals the target's choice. Output == plain output.
  Coupled,
  // The standard rule: drafts sampled from the module's distribution q,
  // accepted with min(1, p/q), residual norm(max(0, p − q)) on rejection,
  // bonus from p. Same distribution as plain sampling, another sample.
  Rejection,
};
const char* spec_sampling_name(SpecSampling m);  // "coupled" | "rejection"

// Independent noise streams keyed by (seed, position, token id).
enum class NoiseStream : uint64_t { Choice = 1, Draft = 2, Accept = 3, Residual = 4 };
// A uniform draw in (0, 1), a pure function of its arguments.
double keyed_uniform(uint64_t seed, int64_t pos, int64_t token, NoiseStream stream);
double keyed_gumbel(uint64_t seed, int64_t pos, int64_t token, NoiseStream stream);

// A distribution over token ids: the kept candidates of one logits row and
// their renormalised probabilities, sorted by id.
struct TokenDist {
  std::vector<int32_t> ids;
  std::vector<double> p;
  double prob(int32_t id) const;  // 0 when not kept
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& o);  // validates o
  const SamplerOptions& options() const { return opt_; }
  bool greedy() const { return opt_.greedy(); }

  // The token at sequence position `pos` from a logits row of n columns whose
  // column i is token ids[i] (ids null: column i is token i; ids ascending).
  // A NaN logit never wins; a row of nothing but NaN (the forward overflowed)
  // is an InputError naming pos.
  int32_t sample(const float* logits, size_t n, int64_t pos, const int32_t* ids = nullptr,
                 NoiseStream stream = NoiseStream::Choice);
  // The kept distribution of a row (temperature > 0), for rejection sampling.
  void distribution(const float* logits, size_t n, const int32_t* ids, TokenDist& out);

  // Draft trees: the w best candidates of a row for the token at position
  // pos, best first — by logit at temperature 0 (ties to the lower id), by the
  // perturbed score log p + g(seed, pos, id) of sample() above it — so the
  // first is exactly sample()'s token. prob: the candidate's probability
  // (softmax of the logits at temperature 0, the kept distribution above),
  // computed only when with_prob (else 0). Fewer than w when fewer are kept.
  struct Candidate {
    int32_t id;
    double prob;
  };
  void top(const float* logits, size_t n, int64_t pos, const int32_t* ids, size_t w,
           bool with_prob, std::vector<Candidate>& out,
           NoiseStream stream = NoiseStream::Choice);

 private:
  // Fills cols_ / logp_ with the kept columns and their log probabilities.
  void keep(const float* logits, size_t n);
  SamplerOptions opt_;
  int64_t draws_ = 0;  // sequential_noise_fault's counter
  std::vector<int32_t> cols_;
  std::vector<double> logp_;   // kept log probabilities (normalised)
  std::vector<double> ex_;     // exp(logp_ + log_sum_): unnormalised probabilities
  double log_sum_ = 0;
  std::vector<uint8_t> in_;    // scratch: membership by kept index
  std::vector<std::pair<float, int32_t>> order_;
  std::vector<std::pair<double, int32_t>> scored_;  // top()'s candidates
};

// Gumbel-max over a TokenDist with keyed noise: a sample of it.
int32_t sample_dist(const TokenDist& d, uint64_t seed, int64_t pos, NoiseStream stream);

}  // namespace mtp::speculative
