// config.json parsing. Every field is read through one of three typed getters that tell absent
// (or null) apart from present-but-wrong, so a config with `"hidden_size": "4096"` fails with a
// message naming hidden_size instead of taking a default. The result always passes Validate().
#include "worker/model/hf_config.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/json/strict_json.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Bad(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("config.json: ", field, " ", why));
}

// The value of `key` in `obj`, or nullptr when it is absent or null.
const Json* Lookup(const Json& obj, absl::string_view key) {
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// An integer field; `fallback` when absent (an error when there is no fallback).
absl::StatusOr<int64_t> GetInt(const Json& obj, absl::string_view key,
                               std::optional<int64_t> fallback = std::nullopt) {
  const Json* v = Lookup(obj, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return Bad(key, "is missing");
  }
  if (v->is_number_unsigned()) {
    if (v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Bad(key, "is out of range");
    }
    return static_cast<int64_t>(v->get<uint64_t>());
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  return Bad(key, absl::StrCat("must be an integer, not ", v->dump()));
}

// A float field (integers accepted); must be finite and representable as a float.
absl::StatusOr<float> GetFloat(const Json& obj, absl::string_view key,
                               std::optional<float> fallback = std::nullopt) {
  const Json* v = Lookup(obj, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return Bad(key, "is missing");
  }
  if (!v->is_number()) return Bad(key, absl::StrCat("must be a number, not ", v->dump()));
  double d = v->get<double>();
  if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) {
    return Bad(key, "is out of range");
  }
  return static_cast<float>(d);
}

absl::StatusOr<bool> GetBool(const Json& obj, absl::string_view key, bool fallback) {
  const Json* v = Lookup(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return Bad(key, absl::StrCat("must be true or false, not ", v->dump()));
  return v->get<bool>();
}

// What differs between the accepted architectures.
struct Architecture {
  absl::string_view class_name;  // "architectures" entry
  absl::string_view model_type;  // "model_type" value
  absl::string_view family;      // ModelConfig::architecture
  int64_t default_kv_heads;      // 0: same as num_attention_heads
  int64_t default_max_positions;
};

constexpr Architecture kArchitectures[] = {
    {"LlamaForCausalLM", "llama", "llama", 0, 2048},
    {"MistralForCausalLM", "mistral", "llama", 8, 4096 * 32},
    {"Qwen2ForCausalLM", "qwen2", "qwen2", 0, 32768},
};

absl::StatusOr<const Architecture*> FindArchitecture(const Json& root) {
  std::string name;
  bool by_class = false;
  if (const Json* list = Lookup(root, "architectures"); list != nullptr) {
    if (!list->is_array() || list->empty() || !(*list)[0].is_string()) {
      return Bad("architectures", "must be a non-empty list of strings");
    }
    name = (*list)[0].get<std::string>();
    by_class = true;
  } else if (const Json* type = Lookup(root, "model_type"); type != nullptr && type->is_string()) {
    name = type->get<std::string>();
  } else {
    return Bad("architectures", "is missing (and so is model_type)");
  }
  for (const Architecture& a : kArchitectures) {
    if (name == (by_class ? a.class_name : a.model_type)) return &a;
  }
  return Bad(by_class ? "architectures" : "model_type",
             absl::StrCat("'", name, "' is not supported (Llama, Mistral or Qwen2 only)"));
}

// The scaling object `rs` (transformers' rope_scaling, or since transformers 5 rope_parameters),
// named `field` in errors.
absl::StatusOr<RopeScaling> ParseRopeScaling(const Json& rs, const std::string& field) {
  RopeScaling scaling;
  const Json* type = Lookup(rs, "rope_type");
  if (type == nullptr) type = Lookup(rs, "type");  // the older spelling
  if (type == nullptr || !type->is_string()) return Bad(field + ".rope_type", "is missing");
  const std::string name = type->get<std::string>();
  if (name == "default") return scaling;
  if (name == "linear") {
    scaling.type = RopeScaling::Type::kLinear;
    ASSIGN_OR_RETURN(scaling.factor, GetFloat(rs, "factor"));
  } else if (name == "llama3") {
    scaling.type = RopeScaling::Type::kLlama3;
    ASSIGN_OR_RETURN(scaling.factor, GetFloat(rs, "factor"));
    ASSIGN_OR_RETURN(scaling.low_freq_factor, GetFloat(rs, "low_freq_factor"));
    ASSIGN_OR_RETURN(scaling.high_freq_factor, GetFloat(rs, "high_freq_factor"));
    ASSIGN_OR_RETURN(scaling.original_max_position_embeddings,
                     GetInt(rs, "original_max_position_embeddings"));
    if (!(scaling.low_freq_factor > 0) || !(scaling.high_freq_factor > scaling.low_freq_factor)) {
      return Bad(field, "needs 0 < low_freq_factor < high_freq_factor");
    }
    if (scaling.original_max_position_embeddings <= 0) {
      return Bad(field + ".original_max_position_embeddings", "must be positive");
    }
  } else {
    return Bad(field, absl::StrCat("type '", name, "' is not supported"));
  }
  if (!(scaling.factor > 0)) return Bad(field + ".factor", "must be positive");
  return scaling;
}

bool SameScaling(const RopeScaling& a, const RopeScaling& b) {
  return a.type == b.type && a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
         a.high_freq_factor == b.high_freq_factor &&
         a.original_max_position_embeddings == b.original_max_position_embeddings;
}

// rope_theta and the scaling: from rope_parameters (transformers 5 writes only that object) or
// from the older top-level rope_theta and rope_scaling. A config may carry both spellings (for
// readers of either, as tools/gpu/hf_reference.py writes), and then they must agree.
absl::Status ParseRope(const Json& root, ModelConfig& c) {
  const Json* rp = Lookup(root, "rope_parameters");
  const Json* rs = Lookup(root, "rope_scaling");
  ASSIGN_OR_RETURN(c.rope_theta, GetFloat(root, "rope_theta", 10000.0f));
  if (rp == nullptr) {
    if (rs == nullptr) return absl::OkStatus();
    if (!rs->is_object()) return Bad("rope_scaling", "must be an object or null");
    ASSIGN_OR_RETURN(c.rope_scaling, ParseRopeScaling(*rs, "rope_scaling"));
    return absl::OkStatus();
  }
  if (!rp->is_object()) return Bad("rope_parameters", "must be an object or null");
  if (rs != nullptr && !rs->is_object()) return Bad("rope_scaling", "must be an object or null");
  const float top_theta = c.rope_theta;
  ASSIGN_OR_RETURN(c.rope_theta, GetFloat(*rp, "rope_theta", top_theta));
  if (Lookup(root, "rope_theta") != nullptr && c.rope_theta != top_theta) {
    return Bad("rope_theta", "disagrees with rope_parameters.rope_theta");
  }
  if (Lookup(*rp, "rope_type") != nullptr || Lookup(*rp, "type") != nullptr) {
    ASSIGN_OR_RETURN(c.rope_scaling, ParseRopeScaling(*rp, "rope_parameters"));
  }  // else theta alone: no scaling
  if (rs != nullptr) {
    ASSIGN_OR_RETURN(const RopeScaling older, ParseRopeScaling(*rs, "rope_scaling"));
    if (!SameScaling(older, c.rope_scaling)) {
      return Bad("rope_scaling", "disagrees with rope_parameters");
    }
  }
  return absl::OkStatus();
}

// The attention window when the config turns sliding-window attention on, else nullopt.
absl::StatusOr<std::optional<int64_t>> SlidingWindow(const Json& root, const Architecture& arch) {
  if (arch.model_type == "llama") return std::nullopt;
  if (arch.model_type == "qwen2") {
    ASSIGN_OR_RETURN(bool enabled, GetBool(root, "use_sliding_window", false));
    if (!enabled) return std::nullopt;
  }
  if (Lookup(root, "sliding_window") == nullptr) return std::nullopt;
  ASSIGN_OR_RETURN(int64_t window, GetInt(root, "sliding_window"));
  if (window <= 0) return Bad("sliding_window", "must be positive");
  return window;
}

}  // namespace

absl::StatusOr<ModelConfig> ParseHfConfig(std::string_view json_text) {
  auto parsed = ParseStrictJson(json_text);
  if (!parsed.ok()) return Bad("text", parsed.status().message());
  const Json& root = *parsed;
  if (!root.is_object()) return Bad("text", "is not a JSON object");
  ASSIGN_OR_RETURN(const Architecture* arch, FindArchitecture(root));

  ModelConfig c;
  c.architecture = std::string(arch->family);
  ASSIGN_OR_RETURN(c.vocab_size, GetInt(root, "vocab_size"));
  ASSIGN_OR_RETURN(c.hidden_size, GetInt(root, "hidden_size"));
  ASSIGN_OR_RETURN(c.intermediate_size, GetInt(root, "intermediate_size"));
  ASSIGN_OR_RETURN(c.num_layers, GetInt(root, "num_hidden_layers"));
  ASSIGN_OR_RETURN(c.num_heads, GetInt(root, "num_attention_heads"));
  if (c.num_heads <= 0) return Bad("num_attention_heads", "must be positive");
  ASSIGN_OR_RETURN(c.num_kv_heads,
                   GetInt(root, "num_key_value_heads",
                          arch->default_kv_heads > 0 ? arch->default_kv_heads : c.num_heads));
  if (Lookup(root, "head_dim") != nullptr) {
    ASSIGN_OR_RETURN(c.head_dim, GetInt(root, "head_dim"));
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      return Bad("hidden_size", "is not a multiple of num_attention_heads (and no head_dim)");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  ASSIGN_OR_RETURN(c.max_position_embeddings,
                   GetInt(root, "max_position_embeddings", arch->default_max_positions));
  ASSIGN_OR_RETURN(c.rms_norm_eps, GetFloat(root, "rms_norm_eps", 1e-6f));
  RETURN_IF_ERROR(ParseRope(root, c));
  ASSIGN_OR_RETURN(c.tie_word_embeddings, GetBool(root, "tie_word_embeddings", false));
  if (arch->family == "qwen2") {
    c.attention_bias = true;
  } else {
    ASSIGN_OR_RETURN(c.attention_bias, GetBool(root, "attention_bias", false));
  }

  ASSIGN_OR_RETURN(bool mlp_bias, GetBool(root, "mlp_bias", false));
  if (mlp_bias) return Bad("mlp_bias", "= true is not supported");
  if (const Json* act = Lookup(root, "hidden_act"); act != nullptr && *act != "silu") {
    return Bad("hidden_act", absl::StrCat(act->dump(), " is not supported (silu only)"));
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> window, SlidingWindow(root, *arch));
  if (window && *window < c.max_position_embeddings) {
    PLOG_WARN(
        "config.json: sliding window {} < max_position_embeddings {}; serving at most {} "
        "positions (full attention is exact there)",
        *window, c.max_position_embeddings, *window);
    c.max_position_embeddings = *window;
  }
  RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace pagellm
