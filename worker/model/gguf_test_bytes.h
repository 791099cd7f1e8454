// Test-only helpers for writing GGUF bytes by hand (so tests can also build broken files).
#ifndef PAGELLM_WORKER_MODEL_GGUF_TEST_BYTES_H_
#define PAGELLM_WORKER_MODEL_GGUF_TEST_BYTES_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "worker/model/gguf_file.h"

namespace pagellm::gguf_test {

// Little-endian bytes of a scalar.
template <typename T>
std::string Le(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}
// A GGUF string: u64 length + bytes.
inline std::string Str(std::string_view s) { return Le<uint64_t>(s.size()) + std::string(s); }
// A metadata value type tag.
inline std::string Type(GgufValueType t) { return Le(static_cast<uint32_t>(t)); }

}  // namespace pagellm::gguf_test

#endif  // PAGELLM_WORKER_MODEL_GGUF_TEST_BYTES_H_
