// libFuzzer target for SafetensorsFile::FromBytes (and ParseStrictJson under it): any input must
// give either an error or a file whose every accessor and every tensor byte can be read
// (ASan/UBSan check the reads), and whose tensors tile the data section as the header promises.
//
// Each input is tried twice: as a whole file, and as "HEADER\0DATA" with the 8-byte length
// prefix computed here, so that mutations of the JSON header need not keep the prefix in step.
//
// Build and run: see tools/fuzz/run_ci.sh (seeds in tools/fuzz/seeds/safetensors_file_fuzz/,
// dictionary tools/fuzz/safetensors.dict).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "tools/fuzz/fuzz_check.h"
#include "worker/model/safetensors_file.h"

namespace {

void Exercise(std::string bytes) {
  const uint64_t file_size = bytes.size();
  uint64_t header_len = 0;
  if (file_size >= 8) {
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
  }
  pagellm::SafetensorsFile::Limits limits;
  limits.max_header_bytes = 1 << 20;
  auto file = pagellm::SafetensorsFile::FromBytes(std::move(bytes), limits);
  if (!file.ok()) return;
  const pagellm::SafetensorsFile& f = **file;
  volatile uint64_t sink = 0;
  for (const auto& [key, value] : f.metadata()) sink = sink + key.size() + value.size();
  uint64_t total = 0;
  for (const pagellm::SafetensorsTensor& t : f.tensors()) {
    FUZZ_CHECK(f.Find(t.name) == &t);
    FUZZ_CHECK(t.shape.size() <= static_cast<size_t>(limits.max_dims));
    int64_t elements = 1;
    for (int64_t d : t.shape) {
      FUZZ_CHECK(d >= 0);
      elements *= d;  // cannot overflow: Parse checked the product
    }
    FUZZ_CHECK(elements == t.num_elements);
    FUZZ_CHECK(t.nbytes == static_cast<uint64_t>(t.num_elements) * SafetensorsDtypeSize(t.dtype));
    FUZZ_CHECK(!SafetensorsDtypeName(t.dtype).empty() && SafetensorsDtypeName(t.dtype) != "?");
    auto flt = f.GetFloatTensor(t.name);
    FUZZ_CHECK(flt.ok() == pagellm::IsSupportedFloatDtype(t.dtype));
    if (flt.ok()) FUZZ_CHECK(*flt == &t);
    FUZZ_CHECK(t.data != nullptr || t.nbytes == 0);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
    sink = sink + sum;
    total += t.nbytes;
  }
  // The ranges tile the data section: their sizes add up to it exactly.
  FUZZ_CHECK(8 + header_len + total == file_size);
  FUZZ_CHECK(f.Find("\xff no such tensor") == nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Exercise(std::string(input));
  const size_t nul = input.find('\0');
  if (nul != std::string_view::npos) {
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((uint64_t{nul} >> (8 * i)) & 0xff);
    file.append(input.substr(0, nul));
    file.append(input.substr(nul + 1));
    Exercise(std::move(file));
  }
  return 0;
}
