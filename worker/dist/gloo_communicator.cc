// Gloo reports failures by throwing: IoException for a timeout or a broken connection, Exception
// or EnforceNotMet (std::runtime_error) for misuse. Every call into Gloo goes through Guard(),
// which turns the exception into a Status and marks the communicator broken: Gloo's pairs cannot
// be resumed after a failed operation, so later calls fail at once with the first error.
#include "worker/dist/gloo_communicator.h"

#include <chrono>
#include <cstring>
#include <exception>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/gather.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"

namespace pagellm {
namespace {

// A Gloo exception's message as a Status. Gloo's timeouts say "Timed out" (collectives) or
// "timeout" (the store's waits); anything else from a pair is a lost connection.
absl::Status FromGloo(const char* what, const std::exception& e) {
  const std::string msg = absl::StrCat("gloo ", what, ": ", e.what());
  const std::string lower = absl::AsciiStrToLower(e.what());
  if (absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout")) {
    return absl::DeadlineExceededError(msg);
  }
  return absl::UnavailableError(msg);
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::transport::Device> device,
                   std::shared_ptr<gloo::rendezvous::Context> context)
      : device_(std::move(device)), context_(std::move(context)) {}

  int rank() const override { return context_->rank; }
  int world_size() const override { return context_->size; }

  absl::Status AllReduceSum(float* data, int64_t n) override {
    if (n <= 0) return absl::OkStatus();
    return Guard("all-reduce", [&] {
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(data, static_cast<size_t>(n));
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      gloo::allreduce(opts);
    });
  }

  absl::Status AllGather(const float* in, int64_t n, float* out) override {
    if (n <= 0) return absl::OkStatus();
    // Gloo's all-gather reads this rank's slot of `out` as its input.
    std::memcpy(out + rank() * n, in, n * sizeof(float));
    return Guard("all-gather", [&] {
      gloo::AllgatherOptions opts(context_);
      opts.setOutput(out, static_cast<size_t>(n * world_size()));
      gloo::allgather(opts);
    });
  }

  absl::Status Gather(const float* in, int64_t n, float* out, int root) override {
    if (root < 0 || root >= world_size()) {
      return absl::InvalidArgumentError(absl::StrCat("gather root ", root, " out of range"));
    }
    if (n <= 0) return absl::OkStatus();
    return Guard("gather", [&] {
      gloo::GatherOptions opts(context_);
      opts.setInput(const_cast<float*>(in), static_cast<size_t>(n));  // only read
      if (rank() == root) opts.setOutput(out, static_cast<size_t>(n * world_size()));
      opts.setRoot(root);
      gloo::gather(opts);
    });
  }

  absl::Status Broadcast(void* data, int64_t bytes, int root) override {
    if (root < 0 || root >= world_size()) {
      return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " out of range"));
    }
    if (bytes <= 0) return absl::OkStatus();
    return Guard("broadcast", [&] {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(static_cast<char*>(data), static_cast<size_t>(bytes));
      opts.setRoot(root);
      gloo::broadcast(opts);
    });
  }

  absl::Status Barrier() override {
    return Guard("barrier", [&] {
      gloo::BarrierOptions opts(context_);
      gloo::barrier(opts);
    });
  }

 private:
  template <typename Fn>
  absl::Status Guard(const char* what, Fn&& fn) {
    if (!broken_.ok()) return broken_;
    const auto start = std::chrono::steady_clock::now();
    try {
      fn();
    } catch (const std::exception& e) {
      broken_ = FromGloo(what, e);
    }
    AddCollectiveSeconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return broken_;
  }

  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  absl::Status broken_;  // the first failure; OK while the group works
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(const GlooOptions& options,
                                                          gloo::rendezvous::Store& store) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options.rank, " of world size ",
                                                   options.world_size, " is out of range"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the communicator's timeout must be positive");
  }
  const auto timeout = std::chrono::milliseconds(absl::ToInt64Milliseconds(options.timeout));
  try {
    gloo::transport::tcp::attr attr(options.hostname.c_str());
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
    context->setTimeout(timeout);
    context->connectFullMesh(store, device);
    return std::make_unique<GlooCommunicator>(std::move(device), std::move(context));
  } catch (const std::exception& e) {
    return FromGloo("connect", e);
  }
}

}  // namespace pagellm
