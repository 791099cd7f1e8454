#include "worker/model/model_config.h"

#include "absl/strings/str_cat.h"

namespace pagellm {

absl::Status ModelConfig::Validate() const {
  auto bad = [](absl::string_view what, int64_t v) {
    return absl::InvalidArgumentError(absl::StrCat("model config: bad ", what, " = ", v));
  };
  constexpr int64_t kMaxDim = 1 << 20;
  if (vocab_size <= 0 || vocab_size > (1 << 22)) return bad("vocab_size", vocab_size);
  if (hidden_size <= 0 || hidden_size > kMaxDim) return bad("hidden_size", hidden_size);
  if (intermediate_size <= 0 || intermediate_size > kMaxDim)
    return bad("intermediate_size", intermediate_size);
  if (num_layers <= 0 || num_layers > 1024) return bad("num_layers", num_layers);
  if (num_heads <= 0 || num_heads > 1024) return bad("num_heads", num_heads);
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0) return bad("num_kv_heads", num_kv_heads);
  if (head_dim <= 0 || head_dim % 2 != 0 || head_dim > 1024) return bad("head_dim", head_dim);
  if (max_position_embeddings <= 0 || max_position_embeddings > (1 << 24))
    return bad("max_position_embeddings", max_position_embeddings);
  if (!(rms_norm_eps > 0 && rms_norm_eps < 1))
    return absl::InvalidArgumentError("bad rms_norm_eps");
  if (!(rope_theta > 0)) return absl::InvalidArgumentError("bad rope_theta");
  if (rope_scaling.type != RopeScaling::Type::kNone && !(rope_scaling.factor > 0))
    return absl::InvalidArgumentError("bad rope_scaling.factor");
  return absl::OkStatus();
}

}  // namespace pagellm
