// TensorMap: a checkpoint's tensors by name, as the file holds them -- element type, shape and
// bytes -- whatever the file format. Nothing is converted, widened or repacked here: each
// backend turns the views into its own layout (the CPU backend packs them for its kernels and
// widens bf16 itself; a CUDA backend uploads bf16/fp16 as they are).
//
// A view's bytes are borrowed from a memory-mapped file that the map keeps alive, or owned by the
// map (generated weights). Either way they stay valid, at a fixed address, while the map lives
// (moving the map keeps them in place).
//
// ShardOf() cuts the slice one rank holds in a Megatron-style tensor-parallel split: a
// column-parallel matrix (Q/K/V, gate/up) by rows, a row-parallel one (O, down) by columns. A
// row slice is contiguous; a column slice is a strided view (row_stride_bytes > row bytes).
//
// Immutable once built; thread-safe for concurrent reads.
#ifndef PAGELLM_WORKER_MODEL_TENSOR_MAP_H_
#define PAGELLM_WORKER_MODEL_TENSOR_MAP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ggml_type.h"

namespace pagellm {

struct TensorView {
  GgmlType dtype = GgmlType::kF32;
  // Row-major, outermost first (PyTorch / safetensors order; GGUF's dims are reversed on read).
  // 1-D or 2-D for everything a Llama-family model holds.
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  // Bytes from the start of one row (last dimension) to the next; row_bytes() when contiguous.
  int64_t row_stride_bytes = 0;

  [[nodiscard]] int64_t num_elements() const;
  [[nodiscard]] int64_t num_rows() const;  // product of all but the last dimension
  // Bytes one row's elements take (the last dimension in whole GGML blocks).
  [[nodiscard]] int64_t row_bytes() const;
  [[nodiscard]] bool contiguous() const { return row_stride_bytes == row_bytes(); }
  // Start of row r. REQUIRES: 0 <= r < num_rows().
  [[nodiscard]] const uint8_t* row(int64_t r) const { return data + r * row_stride_bytes; }
};

// Which rank of how many a backend loads for; {0, 1} is the whole model.
struct ShardSpec {
  int32_t rank = 0;
  int32_t world_size = 1;
};

// How a tensor is split across ranks: kReplicated (norms, embeddings), kRows (dimension 0:
// column-parallel linear layers and their biases), kColumns (dimension 1: row-parallel layers).
enum class ShardDim { kReplicated, kRows, kColumns };

// The part of `t` that `spec.rank` holds. InvalidArgument for a spec outside 0 <= rank <
// world_size, a split dimension that world_size does not divide, a column split of a 1-D tensor,
// or a column slice that would cut a quantization block.
absl::StatusOr<TensorView> ShardOf(const TensorView& t, const ShardSpec& spec, ShardDim dim);

// "[2048, 576]".
std::string ShapeString(const std::vector<int64_t>& shape);

class TensorMap {
 public:
  TensorMap() = default;
  TensorMap(TensorMap&&) = default;
  TensorMap& operator=(TensorMap&&) = default;
  TensorMap(const TensorMap&) = delete;
  TensorMap& operator=(const TensorMap&) = delete;

  // Adds a view of bytes the caller keeps alive (see KeepAlive). InvalidArgument for an empty
  // name, a shape with a non-positive dimension, an unknown dtype or a last dimension that is not
  // whole blocks; AlreadyExists for a duplicate name.
  absl::Status Add(std::string name, TensorView view);
  // Adds a tensor whose bytes the map takes over; `bytes` must hold exactly the shape's bytes
  // (InvalidArgument otherwise, and as for Add).
  absl::Status AddOwned(std::string name, GgmlType dtype, std::vector<int64_t> shape,
                        std::vector<uint8_t> bytes);
  // Keeps `owner` (a mapped file) alive as long as the map.
  void KeepAlive(std::shared_ptr<const void> owner) { keep_alive_.push_back(std::move(owner)); }

  // The tensor called `name`, or nullptr. Borrowed: valid while the map lives.
  [[nodiscard]] const TensorView* Find(absl::string_view name) const;
  // As Find, but InvalidArgument "missing tensor NAME" when absent.
  absl::StatusOr<const TensorView*> Get(absl::string_view name) const;
  [[nodiscard]] size_t size() const { return tensors_.size(); }
  // Every name, sorted.
  [[nodiscard]] std::vector<std::string> Names() const;
  // Sum of every tensor's bytes.
  [[nodiscard]] int64_t total_bytes() const;

 private:
  absl::flat_hash_map<std::string, TensorView> tensors_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned_;  // stable addresses
  std::vector<std::shared_ptr<const void>> keep_alive_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_TENSOR_MAP_H_
