#include "router/http/embedding_response.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian");

// [x0,x1,...] with each float in its shortest round-trip form.
void AppendFloats(const std::vector<float>& v, std::string* out) {
  out->push_back('[');
  char buf[32];
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out->push_back(',');
    // JSON has no NaN or infinity; a normalized hidden state is finite, but the worker is not
    // trusted blindly.
    const float x = std::isfinite(v[i]) ? v[i] : 0.0f;
    const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), x);
    out->append(buf, r.ptr);
  }
  out->push_back(']');
}

}  // namespace

EmbeddingResponse::EmbeddingResponse(Config config)
    : config_(std::move(config)), embeddings_(config_.inputs), prompt_tokens_(config_.inputs, 0) {}

void EmbeddingResponse::Append(int input, const v1::GenerateResponse& response, std::string*) {
  if (input < 0 || input >= config_.inputs) return;
  if (response.embedding_size() > 0) {
    embeddings_[input].assign(response.embedding().begin(), response.embedding().end());
  }
  if (response.finished()) prompt_tokens_[input] = response.usage().prompt_tokens();
}

void EmbeddingResponse::Reset(int input) {
  if (input < 0 || input >= config_.inputs) return;
  embeddings_[input].clear();
  prompt_tokens_[input] = 0;
}

int64_t EmbeddingResponse::prompt_tokens() const {
  return std::accumulate(prompt_tokens_.begin(), prompt_tokens_.end(), int64_t{0});
}

std::string EmbeddingResponse::Body() const {
  const auto text = [](const std::string& s) {
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  const int64_t tokens = prompt_tokens();
  std::string out = absl::StrCat("{\"id\":", text(config_.id),
                                 ",\"object\":\"list\",\"created\":", config_.created,
                                 ",\"model\":", text(config_.model), ",\"data\":[");
  for (int i = 0; i < config_.inputs; ++i) {
    if (i > 0) out.push_back(',');
    absl::StrAppend(&out, "{\"object\":\"embedding\",\"index\":", i, ",\"embedding\":");
    const std::vector<float>& v = embeddings_[i];
    if (config_.base64) {
      std::string bytes(v.size() * sizeof(float), '\0');
      if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
      absl::StrAppend(&out, "\"", absl::Base64Escape(bytes), "\"");
    } else {
      AppendFloats(v, &out);
    }
    out.push_back('}');
  }
  absl::StrAppend(&out, "],\"usage\":{\"prompt_tokens\":", tokens, ",\"total_tokens\":", tokens,
                  "}}");
  return out;
}

}  // namespace pagellm
