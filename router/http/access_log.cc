#include "router/http/access_log.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace pagellm {
namespace {

// `s` with every byte outside printable ASCII, and the quote and backslash, as \xNN.
void AppendEscaped(std::string_view s, std::string* out) {
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b >= 0x7f || c == '"' || c == '\\') {
      absl::StrAppendFormat(out, "\\x%02x", b);
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace

std::string FormatAccess(const HttpAccess& access) {
  std::string line = "access ";
  AppendEscaped(access.peer, &line);
  line += " \"";
  AppendEscaped(access.method, &line);
  if (!access.path.empty()) {
    line.push_back(' ');
    AppendEscaped(access.path, &line);
  }
  absl::StrAppendFormat(&line, "\" %d %u B %.1f ms", access.status, access.body_bytes,
                        absl::ToDoubleMilliseconds(access.duration));
  if (!access.completed) line += " client left";
  return line;
}

void LogAccess(const HttpAccess& access) { PLOG_INFO("{}", FormatAccess(access)); }

}  // namespace pagellm
