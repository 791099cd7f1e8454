// The leader serializes every call through mu_: a step's message and the step itself (whose
// all-reduces follow the message on the wire) are one critical section, and the heartbeat
// thread sends only between them. The followers' loop is the mirror image: receive a message,
// run it, receive the next.
#include "worker/backend/tp/tensor_parallel_backend.h"

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/backend/tp/step_message.h"

namespace pagellm {
namespace {

// Bounds what a follower accepts: a message of the largest batch's arrays with every block
// table row full, plus slack.
int64_t MaxMessageBytes(const Backend& b) {
  const ForwardBatchLimits l = b.limits();
  const int64_t stride = (l.max_position + l.block_size - 1) / l.block_size;
  const int64_t adapter_step =
      32 + kMaxAdapterPathBytes + (1 + kMaxForgottenAdapters) * (8 + kMaxAdapterNameBytes);
  return std::max(64 + l.max_batch_tokens * (4 * 4 + 8 + 4 + 4 + 4 * stride) +
                      9 * 2 * l.num_kv_blocks + (1 << 16),
                  adapter_step);
}

int64_t MaxCopies(const Backend& b) { return 2 * (b.num_kv_blocks() + b.num_swap_blocks()); }

// Every rank's pool and step shape must agree (block ids mean the same everywhere).
absl::Status CompareShapes(const Backend& b, Communicator* comm) {
  const float mine[4] = {
      static_cast<float>(b.num_kv_blocks()), static_cast<float>(b.num_swap_blocks()),
      static_cast<float>(b.max_batch_tokens()), static_cast<float>(b.block_size())};
  std::vector<float> all(4 * comm->world_size());
  RETURN_IF_ERROR(comm->AllGather(mine, 4, all.data()));
  for (int r = 1; r < comm->world_size(); ++r) {
    for (int i = 0; i < 4; ++i) {
      if (all[4 * r + i] != all[i]) {
        return absl::FailedPreconditionError(absl::StrCat(
            "tensor-parallel rank ", r, " has ", all[4 * r], " KV blocks, ", all[4 * r + 1],
            " swap blocks, a step of ", all[4 * r + 2], " tokens and blocks of ", all[4 * r + 3],
            "; rank 0 has ", all[0], ", ", all[1], ", ", all[2], " and ", all[3]));
      }
    }
  }
  return absl::OkStatus();
}

// Every rank applies an adapter change, then learns the others' outcome (an all-gather of one
// flag each): the first rank whose change failed (its error is in its own log), or -1 when all
// succeeded. The collective's own error otherwise.
absl::StatusOr<int> FirstFailedRank(Communicator* comm, const absl::Status& mine) {
  const float flag = mine.ok() ? 0.0f : 1.0f;
  std::vector<float> all(comm->world_size());
  RETURN_IF_ERROR(comm->AllGather(&flag, 1, all.data()));
  for (int r = 0; r < comm->world_size(); ++r) {
    if (all[r] != 0.0f) return r;
  }
  return -1;
}

class TensorParallelLeader final : public Backend {
 public:
  TensorParallelLeader(std::unique_ptr<Backend> rank0, std::unique_ptr<Communicator> comm,
                       std::unique_ptr<Communicator> model_comm,
                       const TensorParallelOptions& options)
      : comm_(std::move(comm)),
        model_comm_(std::move(model_comm)),
        rank0_(std::move(rank0)),
        options_(options) {
    heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  }

  ~TensorParallelLeader() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      if (broken_.ok()) {
        EncodeControlStep(StepKind::kStop, &message_);
        (void)comm_->BroadcastBytes(&message_, 0, message_.size());
      }
    }
    heartbeat_.join();
    rank0_.reset();  // before the communicator it borrows
  }

  const ModelConfig& config() const override { return rank0_->config(); }
  std::string name() const override {
    return absl::StrCat(rank0_->name(), " x", comm_->world_size(), " (tensor parallel)");
  }
  int64_t block_size() const override { return rank0_->block_size(); }
  int64_t max_batch_tokens() const override { return rank0_->max_batch_tokens(); }
  int64_t num_kv_blocks() const override { return rank0_->num_kv_blocks(); }
  int64_t num_swap_blocks() const override { return rank0_->num_swap_blocks(); }
  const std::vector<std::string>& adapter_names() const override { return rank0_->adapter_names(); }

  absl::Status Forward(const ForwardBatch& batch, const SamplingBatch& sampling,
                       SamplerOutput* out) override {
    absl::MutexLock lock(&mu_);
    EncodeForwardStep(StepKind::kForward, batch, rank0_->block_size(), &message_);
    RETURN_IF_ERROR(Send());
    return Check(rank0_->Forward(batch, sampling, out));
  }

  // Every rank holds the whole hidden state (the residual stream is replicated): rank 0's.
  absl::Status FinalHidden(std::span<const int32_t> rows, float* out) override {
    absl::MutexLock lock(&mu_);
    return rank0_->FinalHidden(rows, out);
  }

  absl::Status ForwardLogits(const ForwardBatch& batch, float* logits) override {
    absl::MutexLock lock(&mu_);
    EncodeForwardStep(StepKind::kLogits, batch, rank0_->block_size(), &message_);
    RETURN_IF_ERROR(Send());
    return Check(rank0_->ForwardLogits(batch, logits));
  }

  bool adapters_can_change() const override { return rank0_->adapters_can_change(); }

  // Each follower reads the adapter from its path itself (as it read --lora-modules at start)
  // the first time the group takes it, keeps that copy while the caller holds the adapter (an
  // engine that serves more adapters than slots moves it between slots: the followers neither
  // read it again nor see other files if its directory changed since), and takes its slice; a
  // change that fails on any rank is undone on all.
  absl::Status SetAdapter(int32_t slot, std::shared_ptr<const LoraAdapter> adapter) override {
    if (!rank0_->adapters_can_change()) return AdaptersFixed();
    if (adapter != nullptr && (adapter->name.empty() || adapter->path.empty() ||
                               adapter->name.size() > kMaxAdapterNameBytes ||
                               adapter->path.size() > kMaxAdapterPathBytes)) {
      return absl::InvalidArgumentError(
          "a tensor-parallel group's adapter needs a name and a path its followers read");
    }
    absl::MutexLock lock(&mu_);
    const std::string name = adapter != nullptr ? adapter->name : "";
    const std::string path = adapter != nullptr ? adapter->path : "";
    bool fresh = false;
    if (adapter != nullptr) {
      std::weak_ptr<const LoraAdapter>& held = held_[name];
      fresh = held.lock() != adapter;
      held = adapter;
    }
    forgotten_.clear();
    for (auto it = held_.begin();
         it != held_.end() && static_cast<int64_t>(forgotten_.size()) < kMaxForgottenAdapters;) {
      if (it->second.expired()) {
        forgotten_.push_back(it->first);
        held_.erase(it++);
      } else {
        ++it;
      }
    }
    EncodeAdapterStep(slot, name, path, fresh, forgotten_, &message_);
    RETURN_IF_ERROR(Send());
    const bool loading = adapter != nullptr;
    const absl::Status mine = rank0_->SetAdapter(slot, std::move(adapter));
    absl::StatusOr<int> failed = FirstFailedRank(comm_.get(), mine);
    if (!failed.ok()) return Check(failed.status());
    if (*failed < 0) return absl::OkStatus();
    if (!mine.ok()) return mine;
    if (loading) (void)rank0_->SetAdapter(slot, nullptr);  // the followers undo theirs too
    return absl::FailedPreconditionError(
        absl::StrCat("tensor-parallel rank ", *failed, " could not ", loading ? "load" : "unload",
                     " LoRA adapter ", name, " (its log says why)"));
  }

  absl::Status CopyKv(std::span<const KvCopy> copies) override {
    if (copies.empty()) return absl::OkStatus();
    absl::MutexLock lock(&mu_);
    EncodeCopyStep(copies, &message_);
    RETURN_IF_ERROR(Send());
    return Check(rank0_->CopyKv(copies));
  }

  int tensor_parallel_size() const override { return comm_->world_size(); }
  double collective_seconds() const override {
    absl::MutexLock lock(&mu_);
    return comm_->collective_seconds();
  }

  absl::Status health() const override {
    absl::MutexLock lock(&health_mu_);
    return health_;
  }

 private:
  // Sends message_ to the followers. A failure breaks the group.
  absl::Status Send() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!broken_.ok()) return broken_;
    last_send_ = absl::Now();
    return Check(comm_->BroadcastBytes(&message_, 0, message_.size()));
  }

  // A step's own InvalidArgument (a bad batch) leaves the group working; anything else from a
  // collective (Unavailable, DeadlineExceeded) breaks it.
  absl::Status Check(absl::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (s.ok() || absl::IsInvalidArgument(s) || absl::IsResourceExhausted(s)) return s;
    if (broken_.ok()) {
      broken_ = absl::UnavailableError(absl::StrCat("tensor-parallel group broken: ", s.message()));
      absl::MutexLock lock(&health_mu_);
      health_ = broken_;
    }
    return broken_;
  }

  void HeartbeatLoop() {
    absl::MutexLock lock(&mu_);
    while (!stopping_ && broken_.ok()) {
      const absl::Time due = last_send_ + options_.heartbeat;
      if (absl::Now() < due) {
        mu_.AwaitWithDeadline(absl::Condition(&stopping_), due);
        continue;
      }
      EncodeControlStep(StepKind::kHeartbeat, &message_);
      (void)Send();
    }
  }

  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Communicator> model_comm_;  // null, or what rank0_'s model uses
  std::unique_ptr<Backend> rank0_;            // borrows comm_ or model_comm_
  const TensorParallelOptions options_;
  mutable absl::Mutex mu_;
  std::string message_ ABSL_GUARDED_BY(mu_);
  // The adapters the followers hold a copy of, by name (see SetAdapter), and a buffer.
  absl::flat_hash_map<std::string, std::weak_ptr<const LoraAdapter>> held_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> forgotten_ ABSL_GUARDED_BY(mu_);
  absl::Time last_send_ ABSL_GUARDED_BY(mu_) = absl::Now();
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  mutable absl::Mutex health_mu_;
  absl::Status health_ ABSL_GUARDED_BY(health_mu_);
  std::thread heartbeat_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeTensorParallelLeader(
    std::unique_ptr<Backend> rank0, std::unique_ptr<Communicator> comm,
    const TensorParallelOptions& options, std::unique_ptr<Communicator> model_comm) {
  if (comm->rank() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the leader must be rank 0, not rank ", comm->rank()));
  }
  RETURN_IF_ERROR(CompareShapes(*rank0, comm.get()));
  return std::unique_ptr<Backend>(
      new TensorParallelLeader(std::move(rank0), std::move(comm), std::move(model_comm), options));
}

absl::Status RunTensorParallelFollower(Backend* backend, Communicator* comm,
                                       const LoraLoader& load_adapter) {
  if (comm->rank() == 0) return absl::InvalidArgumentError("rank 0 leads; it does not follow");
  RETURN_IF_ERROR(CompareShapes(*backend, comm));
  const ForwardBatchLimits limits = backend->limits();
  const int64_t max_bytes = MaxMessageBytes(*backend), max_copies = MaxCopies(*backend);
  std::string bytes;
  StepMessage step;
  // The adapters this rank read while serving, by name, while the leader holds them.
  absl::flat_hash_map<std::string, std::shared_ptr<const LoraAdapter>> held;
  while (true) {
    RETURN_IF_ERROR(comm->BroadcastBytes(&bytes, 0, max_bytes));
    RETURN_IF_ERROR(step.Decode(bytes, limits, max_copies));
    switch (step.kind()) {
      case StepKind::kStop:
        return absl::OkStatus();
      case StepKind::kHeartbeat:
        break;
      case StepKind::kCopyKv:
        RETURN_IF_ERROR(backend->CopyKv(step.copies()));
        break;
      case StepKind::kSetAdapter: {
        const bool loading = !step.adapter_name().empty();
        // A new adapter under this name: a copy held under it is of an older one, even when
        // reading the new one fails here.
        if (step.adapter_fresh()) held.erase(step.adapter_name());
        absl::Status mine;
        if (!loading) {
          mine = backend->SetAdapter(step.adapter_slot(), nullptr);
        } else if (auto it = held.find(step.adapter_name());
                   !step.adapter_fresh() && it != held.end()) {
          mine = backend->SetAdapter(step.adapter_slot(), it->second);  // moved between slots
        } else if (!load_adapter) {
          mine = absl::UnimplementedError("this rank has no LoRA loader");
        } else {
          absl::StatusOr<std::shared_ptr<const LoraAdapter>> adapter =
              load_adapter({step.adapter_name(), step.adapter_path()});
          if (adapter.ok()) {
            held[step.adapter_name()] = *adapter;
            mine = backend->SetAdapter(step.adapter_slot(), *std::move(adapter));
          } else {
            mine = adapter.status();
          }
        }
        for (const std::string& name : step.forgotten_adapters()) held.erase(name);
        if (!mine.ok()) {
          PLOG_WARN("tensor-parallel rank {}: LoRA adapter change in slot {} failed: {}",
                    comm->rank(), step.adapter_slot(), mine.ToString());
        }
        ASSIGN_OR_RETURN(const int failed, FirstFailedRank(comm, mine));
        if (failed >= 0 && mine.ok() && loading) {
          (void)backend->SetAdapter(step.adapter_slot(), nullptr);  // another rank failed
        }
        break;
      }
      case StepKind::kForward:
      case StepKind::kLogits: {
        // The leader samples the logits. A batch the leader's own backend refused fails here
        // too, after the same checks and before any collective: both sides stay in step, so
        // that error is not the group's.
        const absl::Status s = backend->ForwardDiscardLogits(step.batch());
        if (!s.ok() && !absl::IsInvalidArgument(s) && !absl::IsResourceExhausted(s)) return s;
        break;
      }
    }
  }
}

}  // namespace pagellm
