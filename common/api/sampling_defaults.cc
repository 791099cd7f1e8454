#include "common/api/sampling_defaults.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/api/proto_convert.h"
#include "common/json/strict_json.h"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Bad(std::string_view source, std::string_view field, std::string_view what) {
  std::string m(source);
  m.append(": ").append(field).append(" ").append(what);
  return absl::InvalidArgumentError(m);
}

}  // namespace

absl::Status MergeGenerationConfig(std::string_view json, std::string_view source,
                                   v1::SamplingParams* defaults) {
  if (json.size() > kMaxGenerationConfigBytes) {
    return Bad(source, "is", absl::StrCat("larger than ", kMaxGenerationConfigBytes, " bytes"));
  }
  absl::StatusOr<Json> parsed = ParseStrictJson(json);
  if (!parsed.ok()) return Bad(source, "is", absl::StrCat("not JSON: ", parsed.status().message()));
  if (!parsed->is_object()) return Bad(source, "is", "not a JSON object");
  v1::SamplingParams merged = *defaults;
  struct FloatField {
    const char* key;
    void (v1::SamplingParams::*set)(float);
  };
  for (const FloatField& f :
       {FloatField{"temperature", &v1::SamplingParams::set_temperature},
        FloatField{"top_p", &v1::SamplingParams::set_top_p},
        FloatField{"min_p", &v1::SamplingParams::set_min_p},
        FloatField{"repetition_penalty", &v1::SamplingParams::set_repetition_penalty},
        FloatField{"presence_penalty", &v1::SamplingParams::set_presence_penalty},
        FloatField{"frequency_penalty", &v1::SamplingParams::set_frequency_penalty}}) {
    auto it = parsed->find(f.key);
    if (it == parsed->end() || it->is_null()) continue;
    if (!it->is_number() || !std::isfinite(it->get<double>())) {
      return Bad(source, f.key, "must be a number");
    }
    (merged.*f.set)(static_cast<float>(it->get<double>()));
  }
  struct IntField {
    const char* key;
    int64_t min;
    void (v1::SamplingParams::*set)(int32_t);
  };
  for (const IntField& f : {IntField{"top_k", -1, &v1::SamplingParams::set_top_k},
                            IntField{"max_new_tokens", 1, &v1::SamplingParams::set_max_tokens}}) {
    auto it = parsed->find(f.key);
    if (it == parsed->end() || it->is_null()) continue;
    if (!it->is_number_integer()) return Bad(source, f.key, "must be an integer");
    const bool is_unsigned = it->is_number_unsigned();
    const int64_t v = is_unsigned ? static_cast<int64_t>(std::min<uint64_t>(
                                        it->get<uint64_t>(), std::numeric_limits<int64_t>::max()))
                                  : it->get<int64_t>();
    if (v < f.min || v > std::numeric_limits<int32_t>::max()) {
      return Bad(source, f.key,
                 absl::StrCat("must be in [", f.min, ", ", std::numeric_limits<int32_t>::max(),
                              "], got ", v));
    }
    (merged.*f.set)(static_cast<int32_t>(v));
  }
  // The values a request could hold: the request's own checks, on the defaults alone.
  if (absl::Status s = SamplingParamsFromProto(merged).Validate(
          /*vocab_size=*/std::numeric_limits<int32_t>::max());
      !s.ok()) {
    return Bad(source, "has a value no request may use:", std::string(s.message()));
  }
  *defaults = std::move(merged);
  return absl::OkStatus();
}

void ApplySamplingDefaults(const v1::SamplingParams& d, v1::SamplingParams* r) {
  if (d.has_temperature() && !r->has_temperature()) r->set_temperature(d.temperature());
  if (d.has_top_p() && !r->has_top_p()) r->set_top_p(d.top_p());
  if (d.has_top_k() && !r->has_top_k()) r->set_top_k(d.top_k());
  if (d.has_min_p() && !r->has_min_p()) r->set_min_p(d.min_p());
  if (d.has_repetition_penalty() && !r->has_repetition_penalty()) {
    r->set_repetition_penalty(d.repetition_penalty());
  }
  if (d.has_presence_penalty() && !r->has_presence_penalty()) {
    r->set_presence_penalty(d.presence_penalty());
  }
  if (d.has_frequency_penalty() && !r->has_frequency_penalty()) {
    r->set_frequency_penalty(d.frequency_penalty());
  }
}

std::string DescribeSamplingDefaults(const v1::SamplingParams& d) {
  std::vector<std::string> parts;
  auto add = [&parts](const char* name, bool has, double v) {
    if (has) parts.push_back(absl::StrFormat("%s=%g", name, v));
  };
  add("temperature", d.has_temperature(), d.temperature());
  add("top_p", d.has_top_p(), d.top_p());
  add("top_k", d.has_top_k(), d.top_k());
  add("min_p", d.has_min_p(), d.min_p());
  add("repetition_penalty", d.has_repetition_penalty(), d.repetition_penalty());
  add("presence_penalty", d.has_presence_penalty(), d.presence_penalty());
  add("frequency_penalty", d.has_frequency_penalty(), d.frequency_penalty());
  add("max_tokens", d.has_max_tokens(), d.max_tokens());
  return parts.empty() ? "none" : absl::StrJoin(parts, " ");
}

}  // namespace pagellm
