#include "common/ggml_type.h"

namespace pagellm {

GgmlTypeTraits GetGgmlTypeTraits(uint32_t raw) {
  switch (static_cast<GgmlType>(raw)) {
    case GgmlType::kF32:
      return {"f32", 1, 4, true};
    case GgmlType::kF16:
      return {"f16", 1, 2, true};
    case GgmlType::kBF16:
      return {"bf16", 1, 2, true};
    case GgmlType::kQ4_0:
      return {"q4_0", 32, 18, true};
    case GgmlType::kQ4_1:
      return {"q4_1", 32, 20, true};
    case GgmlType::kQ5_0:
      return {"q5_0", 32, 22, true};
    case GgmlType::kQ5_1:
      return {"q5_1", 32, 24, true};
    case GgmlType::kQ8_0:
      return {"q8_0", 32, 34, true};
    case GgmlType::kQ8_1:
      return {"q8_1", 32, 36, false};
    case GgmlType::kQ2_K:
      return {"q2_k", 256, 84, true};
    case GgmlType::kQ3_K:
      return {"q3_k", 256, 110, true};
    case GgmlType::kQ4_K:
      return {"q4_k", 256, 144, true};
    case GgmlType::kQ5_K:
      return {"q5_k", 256, 176, true};
    case GgmlType::kQ6_K:
      return {"q6_k", 256, 210, true};
    case GgmlType::kQ8_K:
      return {"q8_k", 256, 292, true};
  }
  return {"", 0, 0, false};
}

}  // namespace pagellm
