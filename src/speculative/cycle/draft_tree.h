// What one speculative cycle verifies: a TREE of drafted tokens continuing the
// committed sequence, each node attributed to the source that proposed it.
//
// Node i holds token[i], its parent (-1 = the root: the committed sequence,
// whose last token is "next"), and source[i]. Nodes are stored parents first
// (parent[i] < i), so depth(i) = 1 + depth(parent[i]) with depth(root) = 0 and
// a node's path is its ancestors in order. A chain d_0..d_{k-1} is the tree
// with parent[i] = i - 1 — the simple case every chain proposer produces, and
// the only shape the target's verify implements today (tree attention and
// per-node KV slots come with draft trees, see docs/ARCHITECTURE.md).
//
// The verifier returns one choice per node plus one for the root:
// choices[0] = the target's token after the committed sequence, and
// choices[i + 1] = its token after the committed sequence + the path to node i.
// Acceptance walks from the root: the child whose token equals the current
// choice is accepted, and so on; the last choice is the correction (or bonus).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "speculative/cycle/sampler.h"

namespace mtp::speculative {

// Names of the built-in draft sources (sources/draft_source.h registers
// them) and of the harnesses that propose without a source object (the drift
// harness's oracle, the tests' scripted drafts): the keys of
// SpecStats::sources and of --json.
inline constexpr const char* kMtpSource = "mtp";
inline constexpr const char* kAssistantSource = "gemma4-assistant";
inline constexpr const char* kNativeMtpSource = "native-mtp";  // the checkpoint's own head
inline constexpr const char* kPromptSource = "prompt";
inline constexpr const char* kHistorySource = "history";
inline constexpr const char* kOracleSource = "oracle";
inline constexpr const char* kScriptedSource = "scripted";

// Who proposed a drafted token: the per-source counters (SpecStats::sources),
// the policy's arms and the server's colouring read it. `source` is a
// registered source's name (the registry keeps every name for the life of the
// process) or one of the names above: static storage, never freed.
struct DraftOrigin {
  const char* source = kMtpSource;
  int module = 0;  // the depth that proposed it: MTP module k (a chain's node k)
  const char* name() const { return source; }
  bool is(std::string_view n) const { return n == source; }
};

struct DraftTree {
  std::vector<int32_t> token;
  std::vector<int32_t> parent;  // -1 = the root
  std::vector<DraftOrigin> source;
  // Rejection sampling only: the distribution q each node was sampled from
  // (empty otherwise), for the min(1, p/q) test.
  std::vector<TokenDist> dist;

  size_t size() const { return token.size(); }
  bool empty() const { return token.empty(); }
  void clear();
  // Appends a node under `parent` (-1 = root, else an existing node): its index.
  int push(int32_t tok, int parent, DraftOrigin src);
  // A chain of `tokens` from `source`; node i gets {source, module = i}.
  void assign_chain(std::span<const int32_t> tokens, const char* source);
  bool is_chain() const;  // parent[i] == i - 1 for every node
  int depth(size_t i) const;
  int max_depth() const;

  // The accepted path for the verifier's choices ([size() + 1], see above):
  // the node indices from the root's child down, and the token the target
  // chose after them (the correction, or the bonus token).
  struct Accepted {
    std::vector<int32_t> nodes;
    int32_t next = -1;
  };
  Accepted accept(std::span<const int32_t> choices) const;
};

}  // namespace mtp::speculative
