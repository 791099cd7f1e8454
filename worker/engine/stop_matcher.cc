// StopMatcher design.
//
// Build: a byte trie of the stop strings (children kept in a flat, per-node sorted edge list),
// then a breadth-first pass that sets each node's failure link (the longest proper suffix of its
// string that is also in the trie), `completed` (the node's own stop string, else its failure
// node's `completed`: the longest stop string that is a suffix) and `pending` (the node's depth
// when it has children, i.e. it is a proper prefix of a stop string, else its failure node's
// `pending`). Transitions follow failure links until a child matches, so a byte costs O(1)
// amortized: each byte raises the depth by at most one and each failure step lowers it.
#include "worker/engine/stop_matcher.h"

#include <algorithm>
#include <map>
#include <queue>

#include "common/logging.h"

namespace pagellm {

StopMatcher::StopMatcher(const std::vector<std::string>& stops) : stops_(stops) {
  // Trie with ordered children while building; flattened into edges_ afterwards.
  std::vector<std::map<uint8_t, int32_t>> children(1);
  std::vector<int32_t> terminal(1, -1);
  std::vector<int32_t> depth(1, 0);
  for (size_t i = 0; i < stops_.size(); ++i) {
    PAGELLM_CHECK(!stops_[i].empty(),
                  "empty stop string; SamplingParams::Validate() was not called");
    int32_t node = 0;
    for (char ch : stops_[i]) {
      const uint8_t c = static_cast<uint8_t>(ch);
      auto it = children[node].find(c);
      if (it == children[node].end()) {
        const int32_t next = static_cast<int32_t>(children.size());
        children[node].emplace(c, next);
        children.emplace_back();
        terminal.push_back(-1);
        depth.push_back(depth[node] + 1);
        node = next;
      } else {
        node = it->second;
      }
    }
    if (terminal[node] < 0) terminal[node] = static_cast<int32_t>(i);  // duplicates: the first
  }

  nodes_.resize(children.size());
  for (size_t n = 0; n < children.size(); ++n) {
    nodes_[n].depth = depth[n];
    nodes_[n].first_edge = static_cast<int32_t>(edges_.size());
    nodes_[n].num_edges = static_cast<int32_t>(children[n].size());
    for (const auto& [c, child] : children[n]) edges_.push_back(Edge{c, child});
  }

  // Breadth-first: a node's failure node is shallower, so it is final when the node is reached.
  std::queue<int32_t> todo;
  for (int c = 0; c < 256; ++c) root_next_[c] = 0;
  for (const auto& [c, child] : children[0]) {
    root_next_[c] = child;
    todo.push(child);
  }
  while (!todo.empty()) {
    const int32_t n = todo.front();
    todo.pop();
    Node& node = nodes_[n];
    const Node& fail = nodes_[node.fail];
    node.completed = terminal[n] >= 0 ? terminal[n] : fail.completed;
    node.pending = node.num_edges > 0 ? node.depth : fail.pending;
    for (const auto& [c, child] : children[n]) {
      nodes_[child].fail = Next(node.fail, static_cast<char>(c));
      todo.push(child);
    }
  }
}

int32_t StopMatcher::Child(int32_t node, uint8_t c) const {
  const Node& n = nodes_[node];
  const Edge* begin = edges_.data() + n.first_edge;
  const Edge* end = begin + n.num_edges;
  const Edge* it =
      std::lower_bound(begin, end, c, [](const Edge& e, uint8_t b) { return e.byte < b; });
  return it != end && it->byte == c ? it->child : -1;
}

StopMatcher::State StopMatcher::Next(State state, char ch) const {
  const uint8_t c = static_cast<uint8_t>(ch);
  while (state != 0) {
    const int32_t child = Child(state, c);
    if (child >= 0) return child;
    state = nodes_[state].fail;
  }
  return root_next_[c];
}

}  // namespace pagellm
