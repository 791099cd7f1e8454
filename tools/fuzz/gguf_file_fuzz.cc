// libFuzzer target for GgufFile::FromBytes: any input must give either an error or a file whose
// every accessor and every tensor byte can be read (ASan/UBSan check the reads).
//
// Build: cmake -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
//          -DPAGELLM_FUZZ=ON && ninja -C build-fuzz gguf_file_fuzz
// Run:   build-fuzz/bin/gguf_file_fuzz -dict=tools/fuzz/gguf.dict CORPUS_DIR
//        (tools/fuzz/make_gguf_seeds.py CORPUS_DIR writes small valid seed files)
#include <cstddef>
#include <cstdint>
#include <string>

#include "worker/model/gguf_file.h"

namespace {

// Visits a value and its elements; returns a number that depends on all of them.
uint64_t Touch(const pagellm::GgufValue& v) {
  uint64_t h = static_cast<uint64_t>(v.type) + v.IsInteger();
  if (auto i = v.AsInt(); i.ok()) h += static_cast<uint64_t>(*i);
  if (auto f = v.AsFloat(); f.ok()) h += *f > 0;
  if (auto s = v.AsString(); s.ok()) h += s->size();
  if (auto b = v.AsBool(); b.ok()) h += *b;
  if (const auto* arr = v.AsArray()) {
    for (const pagellm::GgufValue& e : *arr) h = h * 31 + Touch(e);
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pagellm::GgufFile::Limits limits;
  limits.max_array_elems = 1 << 16;  // keep memory per input small
  limits.max_total_array_elems = 1 << 18;
  auto file =
      pagellm::GgufFile::FromBytes(std::string(reinterpret_cast<const char*>(data), size), limits);
  if (!file.ok()) return 0;
  volatile uint64_t sink = 0;
  for (const auto& [key, value] : (*file)->metadata()) {
    sink = sink + Touch(value) + key.size();
    if ((*file)->Find(key) != &value) __builtin_trap();
  }
  for (const pagellm::GgufTensorInfo& t : (*file)->tensors()) {
    if ((*file)->FindTensor(t.name) != &t) __builtin_trap();
    uint64_t sum = 0;
    for (uint64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
    sink = sink + sum;
  }
  return 0;
}
