#include "speculative/cycle/draft_tree.h"

#include <algorithm>

#include "core/error.h"

namespace mtp::speculative {

void DraftTree::clear() {
  token.clear();
  parent.clear();
  source.clear();
  dist.clear();
}

int DraftTree::push(int32_t tok, int p, DraftOrigin src) {
  MTP_CHECK(p >= -1 && p < int(size()), "draft tree parent {} of node {} does not exist", p,
            size());
  token.push_back(tok);
  parent.push_back(p);
  source.push_back(src);
  return int(size()) - 1;
}

void DraftTree::assign_chain(std::span<const int32_t> tokens, const char* source) {
  clear();
  for (size_t i = 0; i < tokens.size(); ++i) push(tokens[i], int(i) - 1, {source, int(i)});
}

bool DraftTree::is_chain() const {
  for (size_t i = 0; i < size(); ++i) {
    if (parent[i] != int(i) - 1) return false;
  }
  return true;
}

int DraftTree::depth(size_t i) const {
  int d = 0;
  for (int n = int(i); n >= 0; n = parent[size_t(n)]) ++d;
  return d;
}

int DraftTree::max_depth() const {
  int m = 0;
  for (size_t i = 0; i < size(); ++i) m = std::max(m, depth(i));
  return m;
}

DraftTree::Accepted DraftTree::accept(std::span<const int32_t> choices) const {
  MTP_CHECK(choices.size() == size() + 1, "verifier returned {} choices for {} draft nodes",
            choices.size(), size());
  Accepted a;
  int at = -1;  // the root
  a.next = choices[0];
  for (;;) {
    int child = -1;
    // Nodes are stored parents first, so children of `at` come after it; the
    // first child with the chosen token wins (duplicate siblings are harmless).
    for (size_t i = size_t(at + 1); i < size(); ++i) {
      if (parent[i] == at && token[i] == a.next) {
        child = int(i);
        break;
      }
    }
    if (child < 0) return a;
    a.nodes.push_back(child);
    at = child;
    a.next = choices[size_t(child) + 1];
  }
}

}  // namespace mtp::speculative
