// StopMatcher: one Aho-Corasick automaton over a request's stop strings, built once per request
// and shared (read-only) by all of its sequences; each sequence keeps only a State (one int).
//
// Feeding the text stream byte by byte, the state is the longest suffix of the stream that is a
// prefix of some stop string. From it the matcher answers, in O(1) per byte amortized and
// independent of the number of stop strings:
//  * which stop string a byte completes (the longest one ending there; for duplicates, the
//    first index), and
//  * how many trailing bytes may still become part of a match (the longest suffix of the stream
//    that is a proper prefix of some stop string): what a streaming caller must hold back.
// Memory: O(total bytes of the stop strings).
//
// Thread-safe after construction: every method is const.
#ifndef PAGELLM_WORKER_ENGINE_STOP_MATCHER_H_
#define PAGELLM_WORKER_ENGINE_STOP_MATCHER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pagellm {

class StopMatcher {
 public:
  // A position in the automaton; 0 is the start (nothing matched).
  using State = int32_t;

  // REQUIRES: every string is non-empty (SamplingParams::Validate).
  explicit StopMatcher(const std::vector<std::string>& stops);
  StopMatcher(const StopMatcher&) = delete;
  StopMatcher& operator=(const StopMatcher&) = delete;

  // The state after the stream ending in `state` is extended by byte `c`.
  [[nodiscard]] State Next(State state, char c) const;
  // The index of the longest stop string that ends the stream in `state`, or -1.
  [[nodiscard]] int32_t Completed(State state) const { return nodes_[state].completed; }
  // Trailing bytes of the stream in `state` that are a proper prefix of some stop string.
  [[nodiscard]] int32_t Pending(State state) const { return nodes_[state].pending; }

  [[nodiscard]] bool empty() const { return stops_.empty(); }
  [[nodiscard]] size_t num_stops() const { return stops_.size(); }
  [[nodiscard]] const std::string& stop(int32_t i) const { return stops_[i]; }
  // The automaton's size, for tests and accounting.
  [[nodiscard]] size_t num_states() const { return nodes_.size(); }

 private:
  struct Node {
    int32_t fail = 0;        // longest proper suffix that is also a node
    int32_t depth = 0;       // bytes from the root
    int32_t completed = -1;  // see Completed()
    int32_t pending = 0;     // see Pending()
    int32_t first_edge = 0;  // this node's children: edges_[first_edge, first_edge + num_edges)
    int32_t num_edges = 0;
  };
  struct Edge {
    uint8_t byte;
    int32_t child;
  };

  // The child of `node` on byte `c`, or -1.
  [[nodiscard]] int32_t Child(int32_t node, uint8_t c) const;

  std::vector<std::string> stops_;
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;      // sorted by byte within each node's range
  int32_t root_next_[256] = {};  // dense transitions out of the root (the common case)
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_STOP_MATCHER_H_
