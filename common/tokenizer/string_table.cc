#include "common/tokenizer/string_table.h"

#include <limits>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "common/tokenizer/absl_view.h"

namespace pagellm {

StringTable::StringTable() : offsets_{0}, index_(0, Hash{this}, Eq{this}) {}

absl::Status StringTable::Add(std::string_view text) {
  if (text.size() > std::numeric_limits<uint32_t>::max() - chars_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the vocabulary's texts pass 4 GiB at token ", size()));
  }
  chars_.append(text);
  offsets_.push_back(static_cast<uint32_t>(chars_.size()));
  return absl::OkStatus();
}

void StringTable::Reserve(size_t count, size_t bytes) {
  offsets_.reserve(count + 1);
  chars_.reserve(bytes);
}

int32_t StringTable::Index(int32_t id) {
  auto [it, inserted] = index_.insert(id);
  return inserted ? -1 : *it;
}

int32_t StringTable::Find(std::string_view text) const {
  auto it = index_.find(text);
  return it == index_.end() ? -1 : *it;
}

size_t StringTable::bytes() const {
  return chars_.capacity() + offsets_.capacity() * sizeof(uint32_t) +
         index_.capacity() * (sizeof(int32_t) + 1);
}

size_t StringTable::Hash::operator()(int32_t id) const { return (*this)((*table)[id]); }

size_t StringTable::Hash::operator()(std::string_view text) const {
  return absl::Hash<absl::string_view>()(AbslView(text));
}

}  // namespace pagellm
