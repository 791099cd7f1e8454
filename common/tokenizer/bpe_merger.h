// BpeMerger: the merge step of BPE. Holds the merge rules (left id, right id) -> (rank, merged
// id) and applies them to a sequence of symbol ids: repeatedly merge the adjacent pair with the
// lowest rank, the leftmost one among equal ranks, until no pair has a rule. This is what HF
// tokenizers' BPE model does (and llama.cpp's, and SentencePiece's with ranks from scores).
// O(n log n) per word with a binary heap over a linked list of symbols.
//
// Thread-safe after construction: Merge() is const; callers pass their own scratch space.
#ifndef PAGELLM_COMMON_TOKENIZER_BPE_MERGER_H_
#define PAGELLM_COMMON_TOKENIZER_BPE_MERGER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace pagellm {

class BpeMerger {
 public:
  // Reusable buffers for Merge(); one per thread (e.g. one per Encode call).
  struct Scratch {
    struct Symbol {
      int32_t id;    // -1 once merged into its left neighbour
      int32_t prev;  // index, -1 at the start
      int32_t next;  // index, -1 at the end
    };
    struct Candidate {
      int32_t rank;
      int32_t pos;
      int32_t merged;
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
  };

  // Adds the rule left + right -> merged with priority `rank` (lower merges first). Returns
  // false, keeping the existing rule, when the pair already has one.
  bool Add(int32_t left, int32_t right, int32_t merged, int32_t rank);

  // Merges `ids` in place.
  void Merge(std::vector<int32_t>* ids, Scratch* scratch) const;

  [[nodiscard]] size_t size() const { return rules_.size(); }
  // Heap bytes of the rules.
  [[nodiscard]] size_t bytes() const {
    return rules_.capacity() * (sizeof(std::pair<uint64_t, Rule>) + 1);
  }

 private:
  struct Rule {
    int32_t rank;
    int32_t merged;
  };
  static uint64_t Key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const Rule* Find(int32_t left, int32_t right) const {
    auto it = rules_.find(Key(left, right));
    return it == rules_.end() ? nullptr : &it->second;
  }

  absl::flat_hash_map<uint64_t, Rule> rules_;
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_TOKENIZER_BPE_MERGER_H_
