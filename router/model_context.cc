#include "router/model_context.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/api/proto_convert.h"
#include "common/sampling/sampling_params.h"

namespace pagellm {
namespace {

std::string TokenTextOrEmpty(const Tokenizer& tok, int32_t id) {
  return id < 0 ? std::string() : std::string(tok.TokenText(id));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelContext>> ModelContext::Create(const v1::ModelInfo& info,
                                                                   const v1::TokenizerSpec& spec) {
  if (info.max_model_len() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model info: max_model_len must be > 0, got ", info.max_model_len()));
  }
  absl::StatusOr<VocabSpec> vocab = VocabSpecFromProto(spec);
  if (!vocab.ok()) return vocab.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(*std::move(vocab));
  if (!tok.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker tokenizer: ", std::string(tok.status().message())));
  }
  std::unique_ptr<ChatRenderer> chat;
  absl::Status chat_status;
  if (info.chat_template().empty()) {
    chat_status = absl::FailedPreconditionError(absl::StrCat(
        "model ", info.model_name(), " has no chat template: send a text or token_ids prompt"));
  } else {
    v1::SpecialTokens tokens = info.special_tokens();
    if (!info.has_special_tokens()) {  // an older worker: the tokenizer's own BOS and EOS
      tokens.set_bos_token(TokenTextOrEmpty(**tok, (*tok)->bos_id()));
      tokens.set_eos_token(TokenTextOrEmpty(**tok, (*tok)->eos_id()));
    }
    auto renderer = ChatRenderer::Create(info.chat_template(), std::move(tokens));
    if (renderer.ok()) {
      chat = *std::move(renderer);
    } else {
      chat_status = absl::FailedPreconditionError(
          absl::StrCat("chat prompts are unavailable: ", std::string(renderer.status().message())));
    }
  }
  std::unique_ptr<ModelContext> ctx = TEST_Create(info, *std::move(tok), std::move(chat));
  ctx->chat_status_ = std::move(chat_status);
  return ctx;
}

std::unique_ptr<ModelContext> ModelContext::TEST_Create(v1::ModelInfo info,
                                                        std::unique_ptr<Tokenizer> tokenizer,
                                                        std::unique_ptr<ChatRenderer> chat) {
  std::unique_ptr<ModelContext> ctx(new ModelContext());
  ctx->vocab_size_ = info.vocab_size() > 0 ? info.vocab_size() : tokenizer->vocab_size();
  ctx->max_parallel_samples_ =
      info.max_parallel_samples() > 0 ? info.max_parallel_samples() : kMaxParallelSamples;
  ctx->max_model_len_ = info.max_model_len();
  if (chat == nullptr) {
    ctx->chat_status_ = absl::FailedPreconditionError("the model has no chat template");
  }
  size_t longest = 1;
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
    longest =
        std::max({longest, tokenizer->TokenPiece(id).size(), tokenizer->TokenText(id).size()});
  }
  ctx->longest_piece_bytes_ = static_cast<int64_t>(longest);
  ctx->info_ = std::move(info);
  ctx->tokenizer_ = std::move(tokenizer);
  ctx->chat_ = std::move(chat);
  return ctx;
}

void ModelContext::SetLimits(int32_t max_model_len, int32_t max_parallel_samples) {
  if (max_model_len > 0) max_model_len_.store(max_model_len, std::memory_order_relaxed);
  if (max_parallel_samples > 0) {
    max_parallel_samples_.store(max_parallel_samples, std::memory_order_relaxed);
  }
}

v1::ModelInfo ModelContext::CurrentInfo() const {
  v1::ModelInfo out = info_;
  out.set_max_model_len(max_model_len());
  out.set_max_parallel_samples(max_parallel_samples());
  return out;
}

}  // namespace pagellm
