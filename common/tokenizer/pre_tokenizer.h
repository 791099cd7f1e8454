// PreTokenizer: splits text into the pieces that byte-level BPE merges within.
//
// A pre-tokenizer is a sequence of regular expressions (PCRE2, UTF + UCP, JIT-compiled once at
// creation). Each one splits every piece produced by the previous one into its matches and the
// text between them (HF "Isolated" split), so no byte is ever dropped. The regexes are the ones
// of the HF tokenizer.json files of the model families named by GGUF's tokenizer.ggml.pre:
//
//   default, gpt2, gpt-2, phi-2, mpt, olmo   GPT-2's regex
//   smollm, starcoder, refact                every \p{N} on its own, then GPT-2's regex
//   llama3, llama-v3, llama-bpe              Llama 3's regex (digits in runs of up to 3);
//                                            ignore_merges, BOS added by default
//   qwen2, deepseek-r1-qwen, stablelm2       Qwen2's regex (single digits)
// ("default" differs from llama.cpp, which keeps an older ad-hoc regex for it; current
// converters always name the pre-tokenizer.) tools/convert/gguf_tokenizer_to_hf.py mirrors this
// table.
//
// Thread-safe: Split() is const and keeps no shared mutable state.
#ifndef PAGELLM_COMMON_TOKENIZER_PRE_TOKENIZER_H_
#define PAGELLM_COMMON_TOKENIZER_PRE_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pagellm {

// Per-family defaults that come with a pre-tokenizer name.
struct PreTokenizerDefaults {
  bool ignore_merges = false;  // HF "ignore_merges" (Llama 3)
  bool add_bos = false;        // llama.cpp's default when GGUF has no add_bos_token
};

// GPT-2's pre-tokenizer regex (HF ByteLevel with use_regex).
std::string_view Gpt2PreTokenizerRegex();

// Returns the defaults for `name`; Unimplemented for a name not in the table above.
absl::StatusOr<PreTokenizerDefaults> PreTokenizerDefaultsFor(std::string_view name);

class PreTokenizer {
 public:
  // Builds the pre-tokenizer `name` (see the table above). Unimplemented for an unknown name;
  // Internal if PCRE2 rejects a pattern.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> Create(std::string_view name);
  // Builds one from explicit patterns, applied in order (tests, tokenizer.json Split steps).
  // InvalidArgument when a pattern does not compile.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> FromPatterns(
      const std::vector<std::string>& patterns);

  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends the pieces of `text` to `pieces` as views into `text`; their concatenation is
  // `text`. Empty text gives no pieces.
  // REQUIRES: `text` is valid UTF-8 (the regexes run without re-checking it).
  void Split(std::string_view text, std::vector<std::string_view>* pieces) const;

 private:
  struct Regex;
  PreTokenizer() = default;
  void SplitOne(const Regex& re, std::string_view text, std::vector<std::string_view>* out) const;

  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_TOKENIZER_PRE_TOKENIZER_H_
