#include "common/api/request_limits.h"

#include "absl/strings/str_cat.h"

namespace pagellm {
namespace {

// The longest prefix of `s` of at most `max` bytes that does not split a UTF-8 character.
absl::string_view Utf8Prefix(absl::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end);
}

}  // namespace

std::string QuoteClientValue(absl::string_view value) {
  if (value.size() <= kMaxQuotedBytes) return absl::StrCat("\"", value, "\"");
  return absl::StrCat("\"", Utf8Prefix(value, kMaxQuotedBytes), "...\" (", value.size(), " bytes)");
}

std::string BoundedErrorMessage(absl::string_view message) {
  if (message.size() <= kMaxErrorMessageBytes) return std::string(message);
  return absl::StrCat(Utf8Prefix(message, kMaxErrorMessageBytes - 3), "...");
}

absl::Status CheckMaxBytes(absl::string_view value, size_t max_bytes, absl::string_view field) {
  if (value.size() <= max_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " is ", value.size(), " bytes long; the limit is ", max_bytes));
}

}  // namespace pagellm
