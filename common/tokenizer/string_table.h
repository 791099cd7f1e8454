// StringTable: a vocabulary's texts by id, stored end to end in one buffer, with an optional
// index from text back to id.
//
// A vocabulary of 49,152 short tokens takes about 0.5 MB here (the bytes, one 4-byte offset per
// text and a 4-byte slot per indexed id), where std::string values and hash-map keys take about
// 40 bytes per token each. Lookups hash the text and compare it against the buffer.
//
// Built once by one thread, then immutable: concurrent reads are thread-safe. Not copyable or
// movable (the index refers to the table).
#ifndef PAGELLM_COMMON_TOKENIZER_STRING_TABLE_H_
#define PAGELLM_COMMON_TOKENIZER_STRING_TABLE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"

namespace pagellm {

class StringTable {
 public:
  StringTable();
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;

  // Appends `text` as id size(). InvalidArgument once the texts would pass 4 GiB in all.
  absl::Status Add(std::string_view text);
  // Reserves room for `count` texts of `bytes` bytes in all (optional).
  void Reserve(size_t count, size_t bytes);

  // REQUIRES: 0 <= id < size().
  std::string_view operator[](int32_t id) const {
    return std::string_view(chars_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  int32_t size() const { return static_cast<int32_t>(offsets_.size() - 1); }

  // Makes `id` findable by its text. Returns -1, or the id already indexed under the same text
  // (then `id` is not indexed). REQUIRES: 0 <= id < size().
  int32_t Index(int32_t id);
  // The indexed id whose text is `text`, or -1.
  int32_t Find(std::string_view text) const;

  // Heap bytes held (the buffer, the offsets and the index).
  size_t bytes() const;

 private:
  // Hash and equality over ids that stand for their texts, and over texts themselves.
  struct Hash {
    using is_transparent = void;
    const StringTable* table;
    size_t operator()(int32_t id) const;
    size_t operator()(std::string_view text) const;
  };
  struct Eq {
    using is_transparent = void;
    const StringTable* table;
    bool operator()(int32_t a, int32_t b) const { return a == b || (*table)[a] == (*table)[b]; }
    bool operator()(int32_t a, std::string_view b) const { return (*table)[a] == b; }
    bool operator()(std::string_view a, int32_t b) const { return a == (*table)[b]; }
  };

  std::string chars_;
  std::vector<uint32_t> offsets_;  // size() + 1: text i is chars_[offsets_[i], offsets_[i + 1])
  absl::flat_hash_set<int32_t, Hash, Eq> index_;
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_TOKENIZER_STRING_TABLE_H_
