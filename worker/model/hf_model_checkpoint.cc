// The checkpoint of a Hugging Face directory: its tensors already carry the canonical names, so
// each one the config implies is viewed as stored (F32, F16 or BF16; widening, if a backend
// wants it, is that backend's business). HF keeps Q/K in the rotate-half (NeoX) layout.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/model/hf_checkpoint.h"
#include "worker/model/model_checkpoint.h"

namespace pagellm {
namespace {

GgmlType ToGgml(SafetensorsDtype d) {
  switch (d) {
    case SafetensorsDtype::kF16:
      return GgmlType::kF16;
    case SafetensorsDtype::kBF16:
      return GgmlType::kBF16;
    default:
      return GgmlType::kF32;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelCheckpoint>> ReadHfCheckpoint(
    std::shared_ptr<const HfCheckpoint> hf) {
  auto ckpt = std::make_unique<ModelCheckpoint>();
  ckpt->config = hf->config();
  RETURN_IF_ERROR(ckpt->config.Validate());
  ckpt->rope_neox = true;
  for (const LlamaTensorSpec& spec : LlamaTensorSpecs(ckpt->config)) {
    if (hf->Find(spec.name) == nullptr) continue;  // CheckLlamaTensors names what is missing
    ASSIGN_OR_RETURN(const SafetensorsTensor* t, hf->GetFloatTensor(spec.name));
    TensorView view;
    view.dtype = ToGgml(t->dtype);
    view.shape = t->shape;
    view.data = t->data;
    RETURN_IF_ERROR(ckpt->tensors.Add(spec.name, std::move(view)));
  }
  ckpt->tensors.KeepAlive(std::move(hf));
  RETURN_IF_ERROR(CheckLlamaTensors(*ckpt));
  return ckpt;
}

}  // namespace pagellm
