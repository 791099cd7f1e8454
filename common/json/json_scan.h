// Scanning JSON text without parsing it: where a container ends, and whether it nests too deep,
// so that callers can cut a value out of surrounding text or refuse deep input before a
// recursive parser sees it.
//
// Thread-safe: a pure function.
#ifndef PAGELLM_COMMON_JSON_JSON_SCAN_H_
#define PAGELLM_COMMON_JSON_JSON_SCAN_H_

#include <cstddef>
#include <string_view>

namespace pagellm {

struct JsonContainerScan {
  size_t end = std::string_view::npos;  // one past the closing bracket; npos: none
  bool too_deep = false;                // more than max_depth containers were open at once
};

// Scans from text[begin] (a '{' or '[') past strings and their escapes to the bracket that
// closes it, stopping early when more than `max_depth` containers are open. Brackets are
// counted, not matched ("[}" closes); the parser that reads the value catches that.
inline JsonContainerScan ScanJsonContainer(std::string_view text, size_t begin, int max_depth) {
  JsonContainerScan scan;
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) {
        scan.too_deep = true;
        return scan;
      }
    } else if ((c == '}' || c == ']') && --depth == 0) {
      scan.end = i + 1;
      return scan;
    }
  }
  return scan;
}

}  // namespace pagellm

#endif  // PAGELLM_COMMON_JSON_JSON_SCAN_H_
