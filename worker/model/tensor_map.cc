#include "worker/model/tensor_map.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pagellm {
namespace {

// Dimensions are capped so that products of two fit in int64 with room to spare.
constexpr int64_t kMaxDim = int64_t{1} << 31;

absl::Status CheckShape(absl::string_view name, GgmlType dtype, const std::vector<int64_t>& shape) {
  const GgmlTypeTraits t = GetGgmlTypeTraits(dtype);
  if (name.empty()) return absl::InvalidArgumentError("a tensor without a name");
  if (t.name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, " has unknown type ", static_cast<uint32_t>(dtype)));
  }
  if (shape.empty() || shape.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, " has ", shape.size(), " dimensions"));
  }
  for (int64_t d : shape) {
    if (d <= 0 || d > kMaxDim) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, " has shape ", ShapeString(shape)));
    }
  }
  if (shape.back() % t.block_elems != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " (", std::string(t.name),
                                                   "): its rows of ", shape.back(),
                                                   " are not whole blocks of ", t.block_elems));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t TensorView::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorView::num_rows() const { return shape.empty() ? 0 : num_elements() / shape.back(); }

int64_t TensorView::row_bytes() const {
  if (shape.empty()) return 0;
  const GgmlTypeTraits t = GetGgmlTypeTraits(dtype);
  return t.block_elems > 0 ? shape.back() / t.block_elems * t.block_bytes : 0;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<TensorView> ShardOf(const TensorView& t, const ShardSpec& spec, ShardDim dim) {
  if (spec.world_size < 1 || spec.rank < 0 || spec.rank >= spec.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", spec.rank, " of ", spec.world_size, " does not exist"));
  }
  if (dim == ShardDim::kReplicated || spec.world_size == 1) return t;
  TensorView s = t;
  const GgmlTypeTraits traits = GetGgmlTypeTraits(t.dtype);
  if (t.shape.size() == 1 && dim == ShardDim::kRows) {  // a bias: its only dimension is its row
    const int64_t n = t.shape[0] / spec.world_size;
    if (t.shape[0] % spec.world_size != 0 || n % traits.block_elems != 0) {
      return absl::InvalidArgumentError(absl::StrCat(ShapeString(t.shape), " cannot be split in ",
                                                     spec.world_size, " whole-block parts"));
    }
    s.shape[0] = n;
    s.data = t.data + spec.rank * (n / traits.block_elems) * traits.block_bytes;
    s.row_stride_bytes = s.row_bytes();
    return s;
  }
  if (dim == ShardDim::kRows) {
    if (t.shape[0] % spec.world_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat("dimension 0 of ", ShapeString(t.shape),
                                                     " is not divisible by ", spec.world_size));
    }
    const int64_t rows_per_rank = t.num_rows() / spec.world_size;
    s.shape[0] /= spec.world_size;
    s.data = t.data + spec.rank * rows_per_rank * t.row_stride_bytes;
    return s;
  }
  if (t.shape.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("a column split of the ", t.shape.size(), "-D tensor ", ShapeString(t.shape)));
  }
  const int64_t cols = t.shape[1] / spec.world_size;
  if (t.shape[1] % spec.world_size != 0 || cols % traits.block_elems != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dimension 1 of ", ShapeString(t.shape), " (", std::string(traits.name), ", blocks of ",
        traits.block_elems, ") cannot be split in ", spec.world_size, " whole-block parts"));
  }
  s.shape[1] = cols;
  s.data = t.data + spec.rank * (cols / traits.block_elems) * traits.block_bytes;
  return s;  // row_stride_bytes stays the full row's: a strided view
}

absl::Status TensorMap::Add(std::string name, TensorView view) {
  if (absl::Status s = CheckShape(name, view.dtype, view.shape); !s.ok()) return s;
  if (view.data == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " has no data"));
  if (view.row_stride_bytes == 0) view.row_stride_bytes = view.row_bytes();
  if (view.row_stride_bytes < view.row_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": rows overlap"));
  }
  if (tensors_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("tensor ", name, " appears twice"));
  }
  tensors_.emplace(std::move(name), std::move(view));
  return absl::OkStatus();
}

absl::Status TensorMap::AddOwned(std::string name, GgmlType dtype, std::vector<int64_t> shape,
                                 std::vector<uint8_t> bytes) {
  if (absl::Status s = CheckShape(name, dtype, shape); !s.ok()) return s;
  TensorView view;
  view.dtype = dtype;
  view.shape = std::move(shape);
  view.row_stride_bytes = view.row_bytes();
  if (static_cast<int64_t>(bytes.size()) != view.num_rows() * view.row_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": ", bytes.size(),
                                                   " bytes for shape ", ShapeString(view.shape)));
  }
  owned_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(bytes)));
  view.data = owned_.back()->data();
  return Add(std::move(name), std::move(view));
}

const TensorView* TensorMap::Find(absl::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<const TensorView*> TensorMap::Get(absl::string_view name) const {
  const TensorView* t = Find(name);
  if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
  return t;
}

std::vector<std::string> TensorMap::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, view] : tensors_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

int64_t TensorMap::total_bytes() const {
  int64_t total = 0;
  for (const auto& [name, view] : tensors_) total += view.num_rows() * view.row_bytes();
  return total;
}

}  // namespace pagellm
