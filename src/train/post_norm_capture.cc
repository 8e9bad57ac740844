#include "train/post_norm_capture.h"

#include "core/error.h"
#include "kernels/ops.h"

namespace mtp::train {

PostNormCapture post_norm_capture(const model::Model& m, const std::vector<int32_t>& tokens,
                                  ThreadPool* pool) {
  if (tokens.empty()) fail<InputError>("the post-norm capture of an empty window");
  const int R = int(tokens.size());
  const size_t d = size_t(m.config().d_model), V = size_t(m.config().vocab);
  PostNormCapture c{m.make_cache(1, R, R, 0), {}, {}};
  std::vector<model::Row> rows;
  for (int p = 0; p < R; ++p) rows.push_back({0, p, tokens[size_t(p)]});
  std::vector<float> hidden(size_t(R) * d), logits(size_t(R) * V);
  m.forward(rows, c.kv, {logits.data(), nullptr, hidden.data()}, pool);
  c.post.resize(size_t(R) * d);
  m.final_norm(hidden.data(), size_t(R), c.post.data());
  for (size_t p = 0; p < size_t(R); ++p) {
    c.argmax.push_back(int32_t(kernels::argmax(logits.data() + p * V, V)));
  }
  return c;
}

}  // namespace mtp::train
