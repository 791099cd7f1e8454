// Layout (all integers little-endian, as the x86 and ARM hosts a group runs on store them):
//   u8 kind
//   kForward / kLogits: i64 num_tokens, num_seqs, block_table_stride, num_logits; u8 all_decode;
//     i32 token_ids[n], positions[n], token_seq[n]; i64 slots[n]; i32 query_start[s + 1],
//     seq_lens[s]; for each row s, i32 blocks[ceil(seq_lens[s] / block_size)]; i32 logit_indices
//     [num_logits]. The block size travels too (i64, after all_decode) so that the follower cuts
//     the rows the same way; then u8 has_adapters and, when 1, i32 seq_adapter[s].
//   kCopyKv: i64 count; per copy u8 kind, i32 src, i32 dst.
//   kSetAdapter: i32 slot; u8 fresh; i64 name bytes, name; i64 path bytes, path; i64 count of
//     forgotten names; per name i64 bytes, name.
#include "worker/backend/tp/step_message.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace pagellm {
namespace {

template <typename T>
void Put(std::string* out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
void PutArray(std::string* out, const T* p, int64_t n) {
  if (n > 0) out->append(reinterpret_cast<const char*>(p), static_cast<size_t>(n) * sizeof(T));
}

int64_t UsedBlocks(int32_t seq_len, int64_t block_size) {
  return (seq_len + block_size - 1) / block_size;
}

// Reads from a message, failing (sticky) on a short read.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  bool Get(T* v) {
    if (bytes_.size() - pos_ < sizeof(T)) return ok_ = false;
    std::memcpy(v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return ok_;
  }
  template <typename T>
  bool GetArray(T* p, int64_t n) {
    const auto bytes = static_cast<size_t>(n) * sizeof(T);
    if (n < 0 || bytes_.size() - pos_ < bytes) return ok_ = false;
    if (n > 0) std::memcpy(p, bytes_.data() + pos_, bytes);
    pos_ += bytes;
    return ok_;
  }
  bool done() const { return ok_ && pos_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
  bool ok_ = true;
};

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tensor-parallel step message: ", what));
}

}  // namespace

void EncodeForwardStep(StepKind kind, const ForwardBatch& b, int64_t block_size, std::string* out) {
  out->clear();
  Put(out, static_cast<uint8_t>(kind));
  Put(out, b.num_tokens);
  Put(out, b.num_seqs);
  Put(out, b.block_table_stride);
  Put(out, b.num_logits);
  Put(out, static_cast<uint8_t>(b.all_decode));
  Put(out, block_size);
  PutArray(out, b.token_ids, b.num_tokens);
  PutArray(out, b.positions, b.num_tokens);
  PutArray(out, b.token_seq, b.num_tokens);
  PutArray(out, b.slots, b.num_tokens);
  PutArray(out, b.query_start, b.num_seqs + 1);
  PutArray(out, b.seq_lens, b.num_seqs);
  for (int64_t s = 0; s < b.num_seqs; ++s) {
    PutArray(out, b.block_tables + s * b.block_table_stride,
             std::min(UsedBlocks(b.seq_lens[s], block_size), b.block_table_stride));
  }
  PutArray(out, b.logit_indices, b.num_logits);
  Put(out, static_cast<uint8_t>(b.seq_adapter != nullptr));
  if (b.seq_adapter != nullptr) PutArray(out, b.seq_adapter, b.num_seqs);
}

void EncodeCopyStep(std::span<const KvCopy> copies, std::string* out) {
  out->clear();
  Put(out, static_cast<uint8_t>(StepKind::kCopyKv));
  Put(out, static_cast<int64_t>(copies.size()));
  for (const KvCopy& c : copies) {
    Put(out, static_cast<uint8_t>(c.kind));
    Put(out, c.src);
    Put(out, c.dst);
  }
}

void EncodeControlStep(StepKind kind, std::string* out) {
  out->clear();
  Put(out, static_cast<uint8_t>(kind));
}

void EncodeAdapterStep(int32_t slot, std::string_view name, std::string_view path, bool fresh,
                       std::span<const std::string> forgotten, std::string* out) {
  out->clear();
  Put(out, static_cast<uint8_t>(StepKind::kSetAdapter));
  Put(out, slot);
  Put(out, static_cast<uint8_t>(fresh ? 1 : 0));
  auto put_string = [out](std::string_view s) {
    Put(out, static_cast<int64_t>(s.size()));
    PutArray(out, s.data(), static_cast<int64_t>(s.size()));
  };
  put_string(name);
  put_string(path);
  Put(out, static_cast<int64_t>(forgotten.size()));
  for (const std::string& f : forgotten) put_string(f);
}

absl::Status StepMessage::Decode(std::string_view bytes, const ForwardBatchLimits& limits,
                                 int64_t max_copies) {
  Reader r(bytes);
  uint8_t kind = 0;
  if (!r.Get(&kind)) return Malformed("empty");
  switch (static_cast<StepKind>(kind)) {
    case StepKind::kHeartbeat:
    case StepKind::kStop:
      kind_ = static_cast<StepKind>(kind);
      return r.done() ? absl::OkStatus() : Malformed("trailing bytes");
    case StepKind::kCopyKv: {
      int64_t n = 0;
      if (!r.Get(&n) || n < 0 || n > max_copies) return Malformed("bad copy count");
      copies_.resize(n);
      for (KvCopy& c : copies_) {
        uint8_t k = 0;
        if (!r.Get(&k) || !r.Get(&c.src) || !r.Get(&c.dst)) return Malformed("truncated copies");
        if (k > static_cast<uint8_t>(KvCopy::Kind::kSwapToDevice)) return Malformed("copy kind");
        c.kind = static_cast<KvCopy::Kind>(k);
      }
      kind_ = StepKind::kCopyKv;
      return r.done() ? absl::OkStatus() : Malformed("trailing bytes");
    }
    case StepKind::kSetAdapter: {
      uint8_t fresh = 0;
      if (!r.Get(&adapter_slot_) || !r.Get(&fresh) || fresh > 1) {
        return Malformed("truncated adapter step");
      }
      adapter_fresh_ = fresh == 1;
      auto get_string = [&r](std::string* s, int64_t max) {
        int64_t n = 0;
        if (!r.Get(&n) || n < 0 || n > max) return false;
        s->resize(n);
        return r.GetArray(s->data(), n);
      };
      if (!get_string(&adapter_name_, kMaxAdapterNameBytes) ||
          !get_string(&adapter_path_, kMaxAdapterPathBytes)) {
        return Malformed("adapter name or path");
      }
      int64_t n = 0;
      if (!r.Get(&n) || n < 0 || n > kMaxForgottenAdapters) return Malformed("forgotten count");
      forgotten_adapters_.resize(n);
      for (std::string& f : forgotten_adapters_) {
        if (!get_string(&f, kMaxAdapterNameBytes)) return Malformed("forgotten adapter name");
      }
      kind_ = StepKind::kSetAdapter;
      return r.done() ? absl::OkStatus() : Malformed("trailing bytes");
    }
    case StepKind::kForward:
    case StepKind::kLogits:
      break;
    default:
      return Malformed(absl::StrCat("unknown kind ", kind));
  }
  ForwardBatch& b = batch_;
  uint8_t all_decode = 0;
  int64_t block_size = 0;
  if (!r.Get(&b.num_tokens) || !r.Get(&b.num_seqs) || !r.Get(&b.block_table_stride) ||
      !r.Get(&b.num_logits) || !r.Get(&all_decode) || !r.Get(&block_size)) {
    return Malformed("truncated header");
  }
  const int64_t max_stride =
      limits.block_size > 0 ? (limits.max_position + limits.block_size - 1) / limits.block_size : 0;
  if (b.num_tokens <= 0 || b.num_tokens > limits.max_batch_tokens || b.num_seqs <= 0 ||
      b.num_seqs > b.num_tokens || b.num_logits < 0 || b.num_logits > b.num_tokens ||
      b.block_table_stride <= 0 || b.block_table_stride > max_stride ||
      block_size != limits.block_size) {
    return Malformed("counts beyond the backend's limits");
  }
  const int64_t n = b.num_tokens, s = b.num_seqs;
  token_ids_.resize(n);
  positions_.resize(n);
  token_seq_.resize(n);
  slots_.resize(n);
  query_start_.resize(s + 1);
  seq_lens_.resize(s);
  block_tables_.assign(static_cast<size_t>(s * b.block_table_stride), 0);
  logit_indices_.resize(b.num_logits);
  if (!r.GetArray(token_ids_.data(), n) || !r.GetArray(positions_.data(), n) ||
      !r.GetArray(token_seq_.data(), n) || !r.GetArray(slots_.data(), n) ||
      !r.GetArray(query_start_.data(), s + 1) || !r.GetArray(seq_lens_.data(), s)) {
    return Malformed("truncated arrays");
  }
  for (int64_t i = 0; i < s; ++i) {
    const int32_t len = seq_lens_[i];
    if (len <= 0 || len > limits.max_position) return Malformed("sequence length");
    if (!r.GetArray(block_tables_.data() + i * b.block_table_stride,
                    std::min(UsedBlocks(len, block_size), b.block_table_stride))) {
      return Malformed("truncated block tables");
    }
  }
  if (!r.GetArray(logit_indices_.data(), b.num_logits)) return Malformed("truncated logits");
  uint8_t has_adapters = 0;
  if (!r.Get(&has_adapters) || has_adapters > 1) return Malformed("adapter flag");
  seq_adapter_.resize(has_adapters ? s : 0);
  if (has_adapters && !r.GetArray(seq_adapter_.data(), s)) return Malformed("truncated adapters");
  if (!r.done()) return Malformed("trailing bytes");
  b.token_ids = token_ids_.data();
  b.positions = positions_.data();
  b.token_seq = token_seq_.data();
  b.slots = slots_.data();
  b.query_start = query_start_.data();
  b.seq_lens = seq_lens_.data();
  b.block_tables = block_tables_.data();
  b.logit_indices = logit_indices_.data();
  b.all_decode = all_decode != 0;
  b.seq_adapter = has_adapters ? seq_adapter_.data() : nullptr;
  kind_ = static_cast<StepKind>(kind);
  return absl::OkStatus();
}

}  // namespace pagellm
