#include "worker/dist/communicator.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace pagellm {

absl::Status Communicator::BroadcastBytes(std::string* bytes, int root, int64_t max_bytes) {
  int64_t size = rank() == root ? static_cast<int64_t>(bytes->size()) : 0;
  if (absl::Status s = Broadcast(&size, sizeof(size), root); !s.ok()) return s;
  if (size < 0 || size > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast of ", size, " bytes exceeds the limit of ", max_bytes));
  }
  if (rank() != root) bytes->resize(size);
  if (size == 0) return absl::OkStatus();
  return Broadcast(bytes->data(), size, root);
}

namespace {

class SingleRankCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  absl::Status AllReduceSum(float*, int64_t) override { return absl::OkStatus(); }
  absl::Status AllGather(const float* in, int64_t n, float* out) override {
    if (n > 0) std::memcpy(out, in, n * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status Gather(const float* in, int64_t n, float* out, int) override {
    return AllGather(in, n, out);
  }
  absl::Status Broadcast(void*, int64_t, int) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
};

}  // namespace

std::unique_ptr<Communicator> MakeSingleRankCommunicator() {
  return std::make_unique<SingleRankCommunicator>();
}

}  // namespace pagellm
