// Every waiting call goes: check the group is whole, enqueue NCCL's operation(s) on the stream,
// then Wait(): poll cudaStreamQuery and ncclCommGetAsyncError until done, an error or the
// deadline. The Enqueue* calls stop after the first step; WaitStream is the second on any stream.
#include "worker/dist/nccl_communicator.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gloo/rendezvous/store.h"
#include "worker/dist/nccl_api.h"

namespace pagellm {
namespace {

ncclDataType_t NcclType(CollectiveDtype t) {
  switch (t) {
    case CollectiveDtype::kF16:
      return ncclFloat16;
    case CollectiveDtype::kBF16:
      return ncclBfloat16;
    case CollectiveDtype::kF32:
      break;
  }
  return ncclFloat32;
}

class NcclCommunicator final : public DeviceCommunicator {
 public:
  NcclCommunicator(const NcclApi* api, ncclComm_t comm, cudaStream_t stream, bool owns_stream,
                   const NcclOptions& options)
      : api_(api), comm_(comm), stream_(stream), owns_stream_(owns_stream), options_(options) {}

  ~NcclCommunicator() override {
    if (broken_.ok()) api_->destroy(comm_);  // a broken one was aborted when it broke
    if (owns_stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }

  absl::Status AllReduceSum(float* data, int64_t n) override {
    if (n <= 0) return absl::OkStatus();
    return Run("all-reduce", [&] {
      return api_->all_reduce(data, data, n, ncclFloat32, ncclSum, comm_, stream_);
    });
  }

  absl::Status AllGather(const float* in, int64_t n, float* out) override {
    if (n <= 0) return absl::OkStatus();
    return Run("all-gather",
               [&] { return api_->all_gather(in, out, n, ncclFloat32, comm_, stream_); });
  }

  absl::Status Gather(const float* in, int64_t n, float* out, int root) override {
    if (root < 0 || root >= world_size()) {
      return absl::InvalidArgumentError(absl::StrCat("gather root ", root, " out of range"));
    }
    if (n <= 0) return absl::OkStatus();
    return Run("gather", [&]() -> ncclResult_t {
      if (rank() == root) {
        if (cudaMemcpyAsync(out + root * n, in, n * sizeof(float), cudaMemcpyDeviceToDevice,
                            stream_) != cudaSuccess) {
          return ncclUnhandledCudaError;
        }
      }
      if (ncclResult_t r = api_->group_start(); r != ncclSuccess) return r;
      for (int p = 0; p < world_size(); ++p) {
        if (p == rank()) continue;
        if (rank() == root) {
          if (ncclResult_t r = api_->recv(out + p * n, n, ncclFloat32, p, comm_, stream_);
              r != ncclSuccess) {
            api_->group_end();
            return r;
          }
        } else if (p == root) {
          if (ncclResult_t r = api_->send(in, n, ncclFloat32, root, comm_, stream_);
              r != ncclSuccess) {
            api_->group_end();
            return r;
          }
        }
      }
      return api_->group_end();
    });
  }

  absl::Status Broadcast(void* data, int64_t bytes, int root) override {
    if (root < 0 || root >= world_size()) {
      return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " out of range"));
    }
    if (bytes <= 0) return absl::OkStatus();
    return Run("broadcast",
               [&] { return api_->broadcast(data, data, bytes, ncclUint8, root, comm_, stream_); });
  }

  absl::Status EnqueueAllReduceSum(void* data, int64_t n, CollectiveDtype dtype,
                                   void* stream) override {
    if (n <= 0) return absl::OkStatus();
    return Enqueue("all-reduce", [&] {
      return api_->all_reduce(data, data, n, NcclType(dtype), ncclSum, comm_,
                              static_cast<cudaStream_t>(stream));
    });
  }

  absl::Status EnqueueAllGather(const void* in, int64_t n, CollectiveDtype dtype, void* out,
                                void* stream) override {
    if (n <= 0) return absl::OkStatus();
    return Enqueue("all-gather", [&] {
      return api_->all_gather(in, out, n, NcclType(dtype), comm_,
                              static_cast<cudaStream_t>(stream));
    });
  }

  absl::Status WaitStream(void* stream) override {
    if (!broken_.ok()) return broken_;
    return Wait("step", static_cast<cudaStream_t>(stream), std::chrono::steady_clock::now());
  }

  absl::Status Barrier() override {
    if (barrier_ == nullptr &&
        cudaMalloc(reinterpret_cast<void**>(&barrier_), sizeof(float)) != cudaSuccess) {
      return absl::ResourceExhaustedError("cannot allocate the barrier's device word");
    }
    return AllReduceSum(barrier_, 1);
  }

 private:
  // Enqueues with `enqueue`; a refusal breaks the group.
  template <typename Fn>
  absl::Status Enqueue(const char* what, Fn&& enqueue) {
    if (!broken_.ok()) return broken_;
    if (ncclResult_t r = enqueue(); r != ncclSuccess) {
      return Break(
          absl::UnavailableError(absl::StrCat("nccl ", what, ": ", api_->error_string(r))));
    }
    return absl::OkStatus();
  }

  // Enqueues with `enqueue` on the communicator's stream, then waits for it within the timeout;
  // the time counts as collective seconds.
  template <typename Fn>
  absl::Status Run(const char* what, Fn&& enqueue) {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(Enqueue(what, enqueue));
    const absl::Status s = Wait(what, stream_, start);
    AddCollectiveSeconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return s;
  }

  // Polls `stream` and NCCL's asynchronous error until the stream is done, a peer failed or
  // `start` + the timeout passed; a failure breaks (and so aborts) the communicator.
  absl::Status Wait(const char* what, cudaStream_t stream,
                    std::chrono::steady_clock::time_point start) {
    const auto deadline =
        start + std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.timeout));
    absl::Status s;
    while (true) {
      const cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) {
        s = absl::InternalError(absl::StrCat("nccl ", what, ": ", cudaGetErrorString(q)));
        break;
      }
      ncclResult_t async = ncclSuccess;
      api_->async_error(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        s = absl::UnavailableError(
            absl::StrCat("nccl ", what, ": a peer failed: ", api_->error_string(async)));
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        s = absl::DeadlineExceededError(absl::StrCat("nccl ", what, ": timed out after ",
                                                     absl::FormatDuration(options_.timeout)));
        break;
      }
      std::this_thread::yield();
    }
    return s.ok() ? s : Break(std::move(s));
  }

  // Records the first failure and aborts the communicator at once: NCCL kernels still waiting
  // for a dead peer end, so no later wait on the stream (a synchronize, a free) can hang.
  absl::Status Break(absl::Status s) {
    if (broken_.ok()) {
      broken_ = std::move(s);
      api_->abort(comm_);
    }
    return broken_;
  }

  const NcclApi* api_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  const bool owns_stream_;
  const NcclOptions options_;
  float* barrier_ = nullptr;  // leaked with the process: one word
  absl::Status broken_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceCommunicator>> ConnectNccl(const NcclOptions& options,
                                                                gloo::rendezvous::Store& store,
                                                                cudaStream_t stream) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options.rank, " of world size ",
                                                   options.world_size, " is out of range"));
  }
  absl::StatusOr<const NcclApi*> api = LoadNccl();
  if (!api.ok()) return api.status();
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device found for tensor-parallel rank ", options.rank, " (",
        e == cudaSuccess ? "0 devices"
                         : absl::StrCat(cudaGetErrorName(e), ": ", cudaGetErrorString(e)),
        ")"));
  }
  if (options.device < 0 || options.device >= devices) {
    return absl::InvalidArgumentError(absl::StrCat("tensor-parallel rank ", options.rank,
                                                   " wants GPU ", options.device, "; there are ",
                                                   devices, " CUDA device(s)"));
  }
  if (cudaError_t e = cudaSetDevice(options.device); e != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda device ", options.device, ": ", cudaGetErrorString(e)));
  }
  ncclUniqueId id;
  constexpr char kKey[] = "pagellm/nccl_unique_id";
  try {
    if (options.rank == 0) {
      if (ncclResult_t r = (*api)->get_unique_id(&id); r != ncclSuccess) {
        return absl::UnavailableError(absl::StrCat("ncclGetUniqueId: ", (*api)->error_string(r)));
      }
      store.set(kKey, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
    } else {
      store.wait({kKey});  // a store's get need not wait (gloo's HashStore returns nothing)
      const std::vector<char> bytes = store.get(kKey);
      if (bytes.size() != sizeof(id.internal)) {
        return absl::InternalError("the rendezvous holds a malformed NCCL unique id");
      }
      std::copy(bytes.begin(), bytes.end(), id.internal);
    }
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(absl::StrCat("nccl rendezvous: ", e.what()));
  }
  ncclComm_t comm = nullptr;
  if (ncclResult_t r = (*api)->init_rank(&comm, options.world_size, id, options.rank);
      r != ncclSuccess) {
    return absl::UnavailableError(absl::StrCat("ncclCommInitRank: ", (*api)->error_string(r)));
  }
  const bool own = stream == nullptr;
  if (own) {
    if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        e != cudaSuccess) {
      (*api)->destroy(comm);
      return absl::ResourceExhaustedError(
          absl::StrCat("creating the NCCL stream: ", cudaGetErrorString(e)));
    }
  }
  return std::make_unique<NcclCommunicator>(*api, comm, stream, own, options);
}

}  // namespace pagellm
