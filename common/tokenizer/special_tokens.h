// SpecialTokenTexts: a tokenizer's special tokens as text, as Hugging Face transformers passes
// them to chat templates (its special_tokens_map: bos_token, eos_token, unk_token, pad_token).
#ifndef PAGELLM_COMMON_TOKENIZER_SPECIAL_TOKENS_H_
#define PAGELLM_COMMON_TOKENIZER_SPECIAL_TOKENS_H_

#include <string>

namespace pagellm {

struct SpecialTokenTexts {
  std::string bos;  // "" when the model names none
  std::string eos;
  std::string unk;
  std::string pad;
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_TOKENIZER_SPECIAL_TOKENS_H_
