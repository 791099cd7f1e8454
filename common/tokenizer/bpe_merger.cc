// Invariants of Merge(): live symbols form a doubly linked list in text order; a heap entry
// (rank, pos, merged) is acted on only if symbol `pos` is live, has a right neighbour, and that
// pair's rule still yields `merged` (otherwise the entry is stale and dropped, as in HF).
#include "common/tokenizer/bpe_merger.h"

#include <algorithm>

namespace pagellm {
namespace {

using Candidate = BpeMerger::Scratch::Candidate;

// std::*_heap keep the greatest element first; "greater" here means lower priority.
bool LowerPriority(const Candidate& a, const Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

bool BpeMerger::Add(int32_t left, int32_t right, int32_t merged, int32_t rank) {
  return rules_.try_emplace(Key(left, right), Rule{rank, merged}).second;
}

void BpeMerger::Merge(std::vector<int32_t>* ids, Scratch* scratch) const {
  const size_t n = ids->size();
  if (n < 2 || rules_.empty()) return;
  auto& sym = scratch->symbols;
  auto& heap = scratch->heap;
  sym.resize(n);
  heap.clear();
  for (size_t i = 0; i < n; ++i) {
    sym[i] = {(*ids)[i], static_cast<int32_t>(i) - 1, i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
  }
  auto push = [&](int32_t pos) {
    const int32_t next = sym[pos].next;
    if (next < 0) return;
    if (const Rule* r = Find(sym[pos].id, sym[next].id)) {
      heap.push_back({r->rank, pos, r->merged});
      std::push_heap(heap.begin(), heap.end(), LowerPriority);
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), LowerPriority);
    const Candidate top = heap.back();
    heap.pop_back();
    Scratch::Symbol& left = sym[top.pos];
    if (left.id < 0 || left.next < 0) continue;
    const Rule* r = Find(left.id, sym[left.next].id);
    if (r == nullptr || r->merged != top.merged) continue;
    Scratch::Symbol& right = sym[left.next];
    left.id = top.merged;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    right.id = -1;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = sym[i].next) (*ids)[out++] = sym[i].id;
  ids->resize(out);
}

}  // namespace pagellm
