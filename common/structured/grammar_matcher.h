// GrammarMatcher: where one sequence is in a grammar, which tokens may come next (a bitmask
// over the vocabulary, for the sampler), and advancing past the token that was chosen.
//
// A parse state is the set of parse stacks the bytes so far allow (the grammar need not be
// deterministic). Stacks are linked lists of nodes (grammar position, parent) and states are
// sorted lists of stack tops, both interned in the CompiledGrammar that all matchers of one
// grammar share, so a state is one id; byte transitions between states are memoized: the
// grammar becomes, lazily, a DFA over the states sequences actually reach. Inside a JSON string
// every ordinary byte leads back to the same state, so testing a token is a few table lookups.
//
// Token masks are computed once per state and cached for every sequence that reaches it (a
// schema's requests revisit the same states). Computing one walks the vocabulary sorted by
// bytes, reusing the state of the prefix a token shares with the previous one; a prefix the
// grammar rejects skips every token that starts with it.
//
// Bounds (MatcherLimits): a stack is followed only if it can be finished within
// max_stack_depth nodes (JSON nesting stops at some depth, but a started document can always
// be finished: no state without a way to the end); a state holds at most max_heads stacks; one
// grammar interns at most max_nodes nodes and max_states states (beyond: ResourceExhausted, and
// exhausted() tells the owner to start a fresh CompiledGrammar), remembers at most
// max_transitions transitions (then forgets them all) and max_cached_masks masks.
//
// Not thread-safe: a CompiledGrammar and its matchers belong to one thread (the engine's).
#ifndef PAGELLM_COMMON_STRUCTURED_GRAMMAR_MATCHER_H_
#define PAGELLM_COMMON_STRUCTURED_GRAMMAR_MATCHER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/structured/grammar.h"
#include "common/structured/token_vocabulary.h"

namespace pagellm::structured {

struct MatcherLimits {
  int max_stack_depth = 128;
  int max_heads = 256;
  int64_t max_nodes = int64_t{1} << 17;
  int64_t max_states = int64_t{1} << 16;
  int64_t max_transitions = int64_t{1} << 19;
  int max_cached_masks = 256;
};

struct GrammarStats {
  int64_t masks_computed = 0;
  int64_t masks_cached = 0;  // served from the cache
  int64_t nodes = 0;
  int64_t states = 0;
  int64_t transitions = 0;  // remembered now
};

class CompiledGrammar {
 public:
  static std::shared_ptr<CompiledGrammar> Create(Grammar grammar,
                                                 std::shared_ptr<const TokenVocabulary> vocab,
                                                 const MatcherLimits& limits = MatcherLimits());
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  [[nodiscard]] const TokenVocabulary& vocab() const { return *vocab_; }
  [[nodiscard]] GrammarStats stats() const;
  // True once max_nodes or max_states was reached: matchers on it may fail their next Accept;
  // new requests should get a fresh CompiledGrammar.
  [[nodiscard]] bool exhausted() const { return overflowed_; }
  // False when no output can complete the grammar within max_stack_depth: a rule that can
  // never finish (`root ::= "(" root ")"`), or derivations that must nest deeper. Matchers of
  // such a grammar allow nothing; callers refuse it instead.
  [[nodiscard]] bool can_finish() const { return start_ != kDead; }

 private:
  friend class GrammarMatcher;
  struct Node {
    uint32_t pos;    // the grammar element to match next
    int32_t parent;  // the stack below (-1: none; the grammar ends after this node's rule)
    int32_t depth;
  };
  static constexpr int32_t kAccept = INT32_MAX;  // a head: the grammar may end here
  static constexpr int32_t kDead = -1;           // no state: the bytes are not in the grammar

  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab,
                  const MatcherLimits& limits);
  void ComputeHeights();
  // -1 when the stack could not be finished within max_stack_depth, or out of nodes
  // (overflowed_ set).
  int32_t MakeNode(uint32_t pos, int32_t parent);
  void Closure(int32_t id, std::vector<int32_t>* out);
  // The heads after `byte`, appended to `out` (sorted, unique). False when there are more than
  // max_heads.
  bool Advance(absl::Span<const int32_t> heads, uint8_t byte, std::vector<int32_t>* out);
  // The id of the state with these heads (sorted, unique); kDead when empty or out of states.
  int32_t InternState(const std::vector<int32_t>& heads);
  absl::Span<const int32_t> heads(int32_t state) const {
    return absl::MakeConstSpan(state_heads_.data() + state_begin_[state],
                               state_begin_[state + 1] - state_begin_[state]);
  }
  // The state after `byte` (memoized); kDead when the grammar refuses it.
  int32_t Next(int32_t state, uint8_t byte);
  int32_t Start();
  // The state's token mask; valid until the next call.
  const uint64_t* Mask(int32_t state);
  void ComputeMask(int32_t state, uint64_t* mask);
  [[nodiscard]] bool CanEnd(int32_t state) const {
    const absl::Span<const int32_t> h = heads(state);
    return !h.empty() && h.back() == kAccept;
  }

  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  MatcherLimits limits_;
  std::vector<int32_t> height_;  // by grammar position
  std::vector<Node> nodes_;
  absl::flat_hash_map<uint64_t, int32_t> node_index_;  // (pos, parent) -> node
  std::vector<int32_t> state_heads_;                   // state s: [state_begin_[s], [s + 1])
  std::vector<uint32_t> state_begin_ = {0};
  absl::flat_hash_map<std::vector<int32_t>, int32_t> state_index_;
  absl::flat_hash_map<uint64_t, int32_t> transitions_;  // (state, byte) -> state
  int32_t start_ = kDead;
  bool overflowed_ = false;
  std::vector<int32_t> advanced_;
  std::vector<int32_t> level_state_;  // the mask walk's state after each byte of a token
  // Mask cache, least recently used evicted.
  struct CachedMask {
    int32_t state = kDead;
    std::vector<uint64_t> mask;
    uint64_t last_used = 0;
  };
  std::vector<CachedMask> cache_;
  absl::flat_hash_map<int32_t, int32_t> cache_index_;  // state -> cache_ slot
  uint64_t clock_ = 0;
  int64_t masks_computed_ = 0;
  int64_t masks_cached_ = 0;
};

// A sequence's place in a grammar. Cheap to copy (a state id and a shared pointer): a forked
// sequence copies its parent's.
class GrammarMatcher {
 public:
  // At the grammar's start.
  explicit GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar);

  // Sets bit t of `mask` (vocab().mask_words() words) iff token t's bytes continue the output
  // within the grammar; end-of-generation tokens are the caller's (see CanEnd).
  // REQUIRES: mask.size() == vocab().mask_words().
  void FillNextTokenMask(absl::Span<uint64_t> mask);
  // True when the output so far is complete: generation may end here.
  [[nodiscard]] bool CanEnd() const;
  // True when it is complete and nothing can follow.
  [[nodiscard]] bool MustEnd() const;
  // Advances past `token`. InvalidArgument (the state unchanged) when its bytes do not continue
  // the output; ResourceExhausted when the grammar ran out of nodes or states.
  absl::Status Accept(int32_t token);

  [[nodiscard]] const TokenVocabulary& vocab() const { return grammar_->vocab(); }
  [[nodiscard]] const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  std::shared_ptr<CompiledGrammar> grammar_;
  int32_t state_;
};

}  // namespace pagellm::structured

#endif  // PAGELLM_COMMON_STRUCTURED_GRAMMAR_MATCHER_H_
