// Invariants:
//   - A state is a sorted, duplicate-free list of heads: ids of nodes whose position is a byte
//     set (the next byte must be in it), and kAccept when the grammar may end there. Nodes and
//     states are interned, so equal stacks are one node and equal states one id.
//   - A node's position is never an kEnd element: pushing a rule whose reference ends its
//     alternative reuses the parent as the continuation (a tail call), so right recursion does
//     not grow the stack.
//   - Every node on a stack can finish within max_stack_depth (height_), so every state has a
//     way to the end.
//   - transitions_ and the mask cache only remember: dropping them changes no answer.
#include "common/structured/grammar_matcher.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pagellm::structured {

std::shared_ptr<CompiledGrammar> CompiledGrammar::Create(
    Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab, const MatcherLimits& limits) {
  return std::shared_ptr<CompiledGrammar>(
      new CompiledGrammar(std::move(grammar), std::move(vocab), limits));
}

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab,
                                 const MatcherLimits& limits)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), limits_(limits) {
  level_state_.resize(vocab_->max_token_bytes() + 1);
  ComputeHeights();
  start_ = Start();
}

GrammarStats CompiledGrammar::stats() const {
  return GrammarStats{.masks_computed = masks_computed_,
                      .masks_cached = masks_cached_,
                      .nodes = static_cast<int64_t>(nodes_.size()),
                      .states = static_cast<int64_t>(state_begin_.size() - 1),
                      .transitions = static_cast<int64_t>(transitions_.size())};
}

// height_[p]: the stack height a node at position p needs to finish its alternative, counting
// itself as 1 (see MakeNode): the largest of its elements' own heights from p on (a byte 1; a
// rule reference its rule's height, plus 1 unless it ends the alternative, a tail call). A
// rule's height is its lowest alternative's. These are least fixed points of functions no
// smaller than their arguments, so Knuth's generalization of Dijkstra's algorithm finds them
// exactly: rules settle in increasing height, an alternative is evaluated once every rule it
// refers to has settled, and a rule that never settles cannot finish (kInfinite).
void CompiledGrammar::ComputeHeights() {
  constexpr int32_t kInfinite = 1 << 20;
  const uint32_t num_rules = static_cast<uint32_t>(grammar_.num_rules());
  std::vector<int32_t> rule_height(num_rules, kInfinite);
  std::vector<bool> settled(num_rules, false);
  auto own = [&](uint32_t p) {
    const Grammar::Element& e = grammar_.element(p);
    if (e.kind == Grammar::Kind::kBytes) return 1;
    const bool tail = grammar_.element(p + 1).kind == Grammar::Kind::kEnd;
    return std::min(kInfinite, rule_height[e.index] + (tail ? 0 : 1));
  };
  auto alternative_height = [&](uint32_t start) {
    int32_t h = 0;
    for (uint32_t p = start; grammar_.element(p).kind != Grammar::Kind::kEnd; ++p) {
      h = std::max(h, own(p));
    }
    return h;
  };
  struct Alternative {
    uint32_t rule;
    uint32_t start;
    int32_t unsettled;  // rule references not settled yet
  };
  std::vector<Alternative> alternatives;
  std::vector<std::vector<int32_t>> users(num_rules);  // rule -> alternatives, per reference
  using Candidate = std::pair<int32_t, uint32_t>;      // (height, rule)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  for (uint32_t r = 0; r < num_rules; ++r) {
    for (uint32_t start : grammar_.alternatives(r)) {
      const auto id = static_cast<int32_t>(alternatives.size());
      int32_t unsettled = 0;
      for (uint32_t p = start; grammar_.element(p).kind != Grammar::Kind::kEnd; ++p) {
        if (grammar_.element(p).kind != Grammar::Kind::kRule) continue;
        users[grammar_.element(p).index].push_back(id);
        ++unsettled;
      }
      alternatives.push_back({r, start, unsettled});
      if (unsettled == 0) queue.emplace(alternative_height(start), r);
    }
  }
  while (!queue.empty()) {
    const auto [h, r] = queue.top();
    queue.pop();
    if (settled[r]) continue;
    settled[r] = true;
    rule_height[r] = h;
    for (int32_t a : users[r]) {
      if (--alternatives[a].unsettled == 0) {
        queue.emplace(alternative_height(alternatives[a].start), alternatives[a].rule);
      }
    }
  }
  const size_t num_elements = grammar_.num_elements();
  height_.assign(num_elements, kInfinite);
  int32_t after = 0;  // the height from the position after p on
  for (size_t p = num_elements; p-- > 0;) {
    const auto pos = static_cast<uint32_t>(p);
    after = grammar_.element(pos).kind == Grammar::Kind::kEnd ? 0 : std::max(own(pos), after);
    height_[p] = after;
  }
}

int32_t CompiledGrammar::MakeNode(uint32_t pos, int32_t parent) {
  const int32_t depth = parent < 0 ? 1 : nodes_[parent].depth + 1;
  // Only stacks that can still be finished within the limit: no dead ends.
  if (depth - 1 + height_[pos] > limits_.max_stack_depth) return -1;
  const uint64_t key = (uint64_t{pos} << 32) | static_cast<uint32_t>(parent + 1);
  if (auto it = node_index_.find(key); it != node_index_.end()) return it->second;
  if (static_cast<int64_t>(nodes_.size()) >= limits_.max_nodes) {
    overflowed_ = true;
    return -1;
  }
  nodes_.push_back(Node{pos, parent, depth});
  const auto id = static_cast<int32_t>(nodes_.size() - 1);
  node_index_.emplace(key, id);
  return id;
}

void CompiledGrammar::Closure(int32_t id, std::vector<int32_t>* out) {
  if (static_cast<int>(out->size()) > limits_.max_heads) return;
  const Node n = nodes_[id];  // a copy: MakeNode may grow nodes_
  const Grammar::Element e = grammar_.element(n.pos);
  if (e.kind == Grammar::Kind::kBytes) {
    out->push_back(id);
    return;
  }
  // A rule reference (never kEnd: see the invariants).
  int32_t cont = n.parent;
  if (grammar_.element(n.pos + 1).kind != Grammar::Kind::kEnd) {
    cont = MakeNode(n.pos + 1, n.parent);
    if (cont < 0) return;
  }
  for (uint32_t alt : grammar_.alternatives(e.index)) {
    if (grammar_.element(alt).kind == Grammar::Kind::kEnd) {  // the empty alternative
      if (cont < 0) {
        out->push_back(kAccept);
      } else {
        Closure(cont, out);
      }
      continue;
    }
    const int32_t child = MakeNode(alt, cont);
    if (child >= 0) Closure(child, out);
  }
}

bool CompiledGrammar::Advance(absl::Span<const int32_t> heads, uint8_t byte,
                              std::vector<int32_t>* out) {
  for (int32_t h : heads) {
    if (h == kAccept) continue;
    const Node n = nodes_[h];
    if (!grammar_.byte_set(grammar_.element(n.pos).index).Has(byte)) continue;
    if (grammar_.element(n.pos + 1).kind != Grammar::Kind::kEnd) {
      const int32_t next = MakeNode(n.pos + 1, n.parent);
      if (next >= 0) Closure(next, out);
    } else if (n.parent < 0) {
      out->push_back(kAccept);
    } else {
      Closure(n.parent, out);
    }
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  return static_cast<int>(out->size()) <= limits_.max_heads;
}

int32_t CompiledGrammar::InternState(const std::vector<int32_t>& heads) {
  if (heads.empty()) return kDead;
  if (auto it = state_index_.find(heads); it != state_index_.end()) return it->second;
  if (static_cast<int64_t>(state_begin_.size() - 1) >= limits_.max_states) {
    overflowed_ = true;
    return kDead;
  }
  const auto id = static_cast<int32_t>(state_begin_.size() - 1);
  state_heads_.insert(state_heads_.end(), heads.begin(), heads.end());
  state_begin_.push_back(static_cast<uint32_t>(state_heads_.size()));
  state_index_.emplace(heads, id);
  return id;
}

int32_t CompiledGrammar::Next(int32_t state, uint8_t byte) {
  const uint64_t key = (static_cast<uint64_t>(state) << 8) | byte;
  if (auto it = transitions_.find(key); it != transitions_.end()) return it->second;
  advanced_.clear();
  const bool fits = Advance(heads(state), byte, &advanced_);
  const bool overflowed_before = overflowed_;
  const int32_t next = fits ? InternState(advanced_) : kDead;
  if (overflowed_ && !overflowed_before) return next;  // not remembered: it may differ later
  if (static_cast<int64_t>(transitions_.size()) >= limits_.max_transitions) transitions_.clear();
  transitions_.emplace(key, next);
  return next;
}

int32_t CompiledGrammar::Start() {
  std::vector<int32_t> heads;
  for (uint32_t alt : grammar_.alternatives(grammar_.root())) {
    if (grammar_.element(alt).kind == Grammar::Kind::kEnd) {
      heads.push_back(kAccept);
      continue;
    }
    const int32_t id = MakeNode(alt, -1);
    if (id >= 0) Closure(id, &heads);
  }
  std::sort(heads.begin(), heads.end());
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  return InternState(heads);
}

const uint64_t* CompiledGrammar::Mask(int32_t state) {
  ++clock_;
  if (auto it = cache_index_.find(state); it != cache_index_.end()) {
    ++masks_cached_;
    cache_[it->second].last_used = clock_;
    return cache_[it->second].mask.data();
  }
  int32_t slot;
  if (static_cast<int>(cache_.size()) < limits_.max_cached_masks) {
    slot = static_cast<int32_t>(cache_.size());
    cache_.emplace_back();
    cache_.back().mask.resize(vocab_->mask_words());
  } else {
    slot = 0;
    for (int32_t i = 1; i < static_cast<int32_t>(cache_.size()); ++i) {
      if (cache_[i].last_used < cache_[slot].last_used) slot = i;
    }
    cache_index_.erase(cache_[slot].state);
  }
  CachedMask& entry = cache_[slot];
  entry.state = state;
  entry.last_used = clock_;
  ComputeMask(state, entry.mask.data());
  cache_index_.emplace(state, slot);
  ++masks_computed_;
  return entry.mask.data();
}

void CompiledGrammar::ComputeMask(int32_t state, uint64_t* mask) {
  const TokenVocabulary& v = *vocab_;
  std::memset(mask, 0, sizeof(uint64_t) * v.mask_words());
  if (state == kDead) return;
  // level_state_[d]: the state after the current token's first d bytes, for d <= valid.
  level_state_[0] = state;
  int32_t valid = 0;
  const int32_t n = v.num_sorted();
  for (int32_t i = 0; i < n;) {
    const std::string_view bytes = v.sorted_bytes(i);
    const auto len = static_cast<int32_t>(bytes.size());
    int32_t d = std::min(valid, v.common_prefix(i));
    bool ok = true;
    for (; d < len; ++d) {
      const int32_t next = Next(level_state_[d], static_cast<uint8_t>(bytes[d]));
      if (next == kDead) {
        ok = false;
        break;
      }
      level_state_[d + 1] = next;
    }
    if (ok) {
      const int32_t id = v.sorted_id(i);
      mask[id >> 6] |= uint64_t{1} << (id & 63);
      valid = len;
      ++i;
      continue;
    }
    // Every token that starts with bytes[0, d] fails the same way.
    valid = d;
    ++i;
    while (i < n && v.common_prefix(i) > d) ++i;
  }
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), state_(grammar_->start_) {}

void GrammarMatcher::FillNextTokenMask(absl::Span<uint64_t> mask) {
  const uint64_t* m = grammar_->Mask(state_);
  std::memcpy(mask.data(), m, sizeof(uint64_t) * mask.size());
}

bool GrammarMatcher::CanEnd() const {
  return state_ != CompiledGrammar::kDead && grammar_->CanEnd(state_);
}

bool GrammarMatcher::MustEnd() const { return CanEnd() && grammar_->heads(state_).size() == 1; }

absl::Status GrammarMatcher::Accept(int32_t token) {
  const std::string_view bytes = grammar_->vocab().TokenBytes(token);
  if (bytes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("structured output: token ", token, " has no text the grammar can take"));
  }
  int32_t s = state_;
  for (char c : bytes) {
    if (s == CompiledGrammar::kDead) break;
    s = grammar_->Next(s, static_cast<uint8_t>(c));
  }
  if (s == CompiledGrammar::kDead) {
    if (grammar_->exhausted()) {
      return absl::ResourceExhaustedError(
          "structured output: the grammar's state limit was reached");
    }
    return absl::InvalidArgumentError(
        absl::StrCat("structured output: token ", token, " does not continue the output"));
  }
  state_ = s;
  return absl::OkStatus();
}

}  // namespace pagellm::structured
