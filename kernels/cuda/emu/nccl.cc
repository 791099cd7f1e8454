// The NCCL entry points pagellm uses, for the CPU emulator (cuda_emu.h), for ranks that are
// threads of one process sharing the emulated device (real NCCL refuses two ranks on one GPU; the
// emulator has one). A checking tool, not a product path, like the rest of the emulator:
//   - ncclCommInitRank waits until every rank of the unique id has joined, as NCCL's does.
//   - A collective is host work on its stream (cuda_emu::Enqueue: run at the call, or recorded
//     while the stream is captured and run by each graph launch). Run, it is the rank's next
//     collective in its call order; it waits until every rank has reached the same one, and the
//     last to arrive computes every rank's result. Ranks whose k-th collectives differ (kind,
//     count, type or root) all get ncclInvalidUsage: the misuse NCCL would hang or corrupt on.
//   - Sums are in float in rank order and rounded once to the type (NCCL's order and rounding
//     differ; at world size 1 both are the identity).
//   - ncclSend/ncclRecv inside ncclGroupStart/End run when the group ends: sends are copied into
//     the receiver's mailbox first, then each receive waits for its message. Outside a group a
//     send or receive is a group of one. Collectives inside a group are not emulated
//     (ncclInvalidUsage).
//   - A rank that waits longer than CUDA_EMU_NCCL_TIMEOUT_S (default 60) for its peers, or whose
//     peer aborted, fails the work with ncclRemoteError, which ncclCommGetAsyncError then reports;
//     the stream's work returns cudaErrorLaunchFailure.
// Binaries link these instead of loading libnccl (worker/dist/nccl_linked.cc).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/emu/cuda_emu.h"  // first: it defines the CUDA qualifiers
// clang-format off
#include <nccl.h>
// clang-format on

// One group of ranks (one unique id).
struct NcclEmuGroup {
  enum class Kind { kAllReduce, kAllGather, kBroadcast };
  // The k-th collective: each rank's buffers, filled as the ranks arrive.
  struct Op {
    Kind kind;
    size_t count;
    ncclDataType_t type;
    int root;
    std::vector<const void*> send;
    std::vector<void*> recv;
    int arrived = 0, left = 0;
    bool done = false;
    ncclResult_t result = ncclSuccess;
  };

  explicit NcclEmuGroup(int n) : size(n), joined(n, false) {}

  const int size;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<bool> joined;
  int num_joined = 0;
  bool aborted = false;
  std::map<int64_t, Op> ops;
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> mail;  // (from, to): in order
};

// NCCL's opaque communicator: one rank of a group.
struct ncclComm {
  std::shared_ptr<NcclEmuGroup> group;
  int rank = 0;
  int64_t next = 0;  // the sequence number of this rank's next collective
  std::atomic<ncclResult_t> async{ncclSuccess};
};

namespace cuda_emu {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration Timeout() {
  const char* s = std::getenv("CUDA_EMU_NCCL_TIMEOUT_S");
  const long long v = s != nullptr ? std::atoll(s) : 0;
  return std::chrono::seconds(v > 0 ? v : 60);
}

size_t ElementBytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 0;  // not emulated
  }
}

bool Summable(ncclDataType_t t) {
  return t == ncclFloat32 || t == ncclFloat16 || t == ncclBfloat16;
}

// A summable type's element (see Summable).
Element Of(ncclDataType_t t) {
  return t == ncclBfloat16 ? Element::kBF16 : t == ncclFloat16 ? Element::kF16 : Element::kF32;
}

// The results of a complete op, into every rank's receive buffer (through a copy: buffers may be
// in place).
void Compute(NcclEmuGroup::Op& op, int size) {
  const size_t elem = ElementBytes(op.type), bytes = op.count * elem;
  std::vector<char> result;
  switch (op.kind) {
    case NcclEmuGroup::Kind::kAllReduce: {
      result.resize(bytes);
      const Element t = Of(op.type);
      for (size_t i = 0; i < op.count; ++i) {
        float sum = ReadElement(op.send[0], t, i);  // not 0 + x: -0 stays -0
        for (int r = 1; r < size; ++r) sum += ReadElement(op.send[r], t, i);
        WriteElement(result.data(), t, i, sum);
      }
      for (int r = 0; r < size; ++r) std::memcpy(op.recv[r], result.data(), bytes);
      return;
    }
    case NcclEmuGroup::Kind::kAllGather:
      result.resize(bytes * size);
      for (int r = 0; r < size; ++r) std::memcpy(result.data() + r * bytes, op.send[r], bytes);
      for (int r = 0; r < size; ++r) std::memcpy(op.recv[r], result.data(), result.size());
      return;
    case NcclEmuGroup::Kind::kBroadcast:
      result.assign(static_cast<const char*>(op.send[op.root]),
                    static_cast<const char*>(op.send[op.root]) + bytes);
      for (int r = 0; r < size; ++r) std::memcpy(op.recv[r], result.data(), bytes);
      return;
  }
}

// Waits under `l` until `ready`, a peer's abort or the timeout; false for the latter two.
template <typename Pred>
bool WaitFor(NcclEmuGroup& g, std::unique_lock<std::mutex>& l, Pred ready) {
  const Clock::time_point deadline = Clock::now() + Timeout();
  while (!ready()) {
    if (g.aborted || g.cv.wait_until(l, deadline) == std::cv_status::timeout) return ready();
  }
  return true;
}

cudaError_t Failed(ncclComm_t comm, ncclResult_t r) {
  comm->async = r;
  return cudaErrorLaunchFailure;
}

// The rank's next collective, run: see the file comment.
cudaError_t RunCollective(ncclComm_t comm, NcclEmuGroup::Kind kind, const void* send, void* recv,
                          size_t count, ncclDataType_t type, int root) {
  NcclEmuGroup& g = *comm->group;
  std::unique_lock<std::mutex> l(g.mu);
  if (g.aborted) return Failed(comm, ncclRemoteError);
  const int64_t k = comm->next++;
  NcclEmuGroup::Op& op = g.ops[k];
  if (op.arrived == 0) {
    op.kind = kind;
    op.count = count;
    op.type = type;
    op.root = root;
    op.send.assign(g.size, nullptr);
    op.recv.assign(g.size, nullptr);
  } else if (op.kind != kind || op.count != count || op.type != type || op.root != root) {
    op.result = ncclInvalidUsage;
  }
  op.send[comm->rank] = send;
  op.recv[comm->rank] = recv;
  if (++op.arrived == g.size) {
    if (op.result == ncclSuccess) Compute(op, g.size);
    op.done = true;
    g.cv.notify_all();
  } else if (!WaitFor(g, l, [&] { return op.done; })) {
    return Failed(comm, ncclRemoteError);  // the op stays: the group is broken
  }
  const ncclResult_t result = op.result;
  if (++op.left == g.size) g.ops.erase(k);
  return result == ncclSuccess ? cudaSuccess : Failed(comm, result);
}

struct P2p {
  bool send;
  void* buf;
  size_t bytes;
  int peer;
  ncclComm_t comm;
  cudaStream_t stream;
};

// The thread's open group (ncclGroupStart depth and its point-to-point calls).
thread_local int group_depth = 0;
thread_local std::vector<P2p> group_ops;

// A group's sends, then its receives: see the file comment.
cudaError_t RunP2p(const std::vector<P2p>& ops) {
  for (const P2p& p : ops) {
    if (!p.send) continue;
    NcclEmuGroup& g = *p.comm->group;
    std::lock_guard<std::mutex> l(g.mu);
    const char* b = static_cast<const char*>(p.buf);
    g.mail[{p.comm->rank, p.peer}].emplace_back(b, b + p.bytes);
    g.cv.notify_all();
  }
  for (const P2p& p : ops) {
    if (p.send) continue;
    NcclEmuGroup& g = *p.comm->group;
    std::unique_lock<std::mutex> l(g.mu);
    auto& box = g.mail[{p.peer, p.comm->rank}];
    if (!WaitFor(g, l, [&] { return !box.empty(); })) return Failed(p.comm, ncclRemoteError);
    if (box.front().size() != p.bytes) return Failed(p.comm, ncclInvalidUsage);
    std::memcpy(p.buf, box.front().data(), p.bytes);
    box.pop_front();
  }
  return cudaSuccess;
}

// Runs (or records) `work` on `stream`; a failure run now is reported as `comm`'s error.
ncclResult_t Enqueued(ncclComm_t comm, cudaStream_t stream, std::function<cudaError_t()> work) {
  if (cuda_emu::Enqueue(stream, std::move(work)) == cudaSuccess) return ncclSuccess;
  const ncclResult_t r = comm->async;
  return r != ncclSuccess ? r : ncclUnhandledCudaError;
}

ncclResult_t Collective(ncclComm_t comm, NcclEmuGroup::Kind kind, const void* send, void* recv,
                        size_t count, ncclDataType_t type, int root, cudaStream_t stream) {
  if (comm == nullptr || ElementBytes(type) == 0 || root < 0 || root >= comm->group->size ||
      (count > 0 && (send == nullptr || recv == nullptr))) {
    return ncclInvalidArgument;
  }
  if (kind == NcclEmuGroup::Kind::kAllReduce && !Summable(type)) return ncclInvalidArgument;
  if (group_depth > 0) return ncclInvalidUsage;  // not emulated
  return Enqueued(comm, stream,
                  [=] { return RunCollective(comm, kind, send, recv, count, type, root); });
}

ncclResult_t PointToPoint(bool send, void* buf, size_t count, ncclDataType_t type, int peer,
                          ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr || ElementBytes(type) == 0 || peer < 0 || peer >= comm->group->size ||
      peer == comm->rank || (count > 0 && buf == nullptr)) {
    return ncclInvalidArgument;
  }
  P2p p{send, buf, count * ElementBytes(type), peer, comm, stream};
  if (group_depth > 0) {
    group_ops.push_back(p);
    return ncclSuccess;
  }
  return Enqueued(comm, stream, [ops = std::vector<P2p>{p}] { return RunP2p(ops); });
}

// Unique ids in flight, until their group is whole.
std::mutex registry_mu;
std::map<std::string, std::shared_ptr<NcclEmuGroup>>& Registry() {
  static auto* r = new std::map<std::string, std::shared_ptr<NcclEmuGroup>>;
  return *r;
}

}  // namespace
}  // namespace cuda_emu

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::atomic<uint64_t> counter{0};
  if (id == nullptr) return ncclInvalidArgument;
  std::memset(id->internal, 0, sizeof(id->internal));
  const std::string s = "cuda_emu nccl group " + std::to_string(++counter);
  std::memcpy(id->internal, s.data(), s.size());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int n, ncclUniqueId id, int rank) {
  if (out == nullptr || n < 1 || rank < 0 || rank >= n) return ncclInvalidArgument;
  const std::string key(id.internal, sizeof(id.internal));
  std::shared_ptr<NcclEmuGroup> g;
  {
    std::lock_guard<std::mutex> l(cuda_emu::registry_mu);
    auto& slot = cuda_emu::Registry()[key];
    if (slot == nullptr) slot = std::make_shared<NcclEmuGroup>(n);
    g = slot;
  }
  std::unique_lock<std::mutex> l(g->mu);
  if (g->size != n || g->joined[rank]) return ncclInvalidUsage;
  g->joined[rank] = true;
  if (++g->num_joined == n) {
    std::lock_guard<std::mutex> r(cuda_emu::registry_mu);
    cuda_emu::Registry().erase(key);
    g->cv.notify_all();
  } else if (!cuda_emu::WaitFor(*g, l, [&] { return g->num_joined == n; })) {
    return ncclRemoteError;
  }
  auto* comm = new ncclComm;
  comm->group = std::move(g);
  comm->rank = rank;
  *out = comm;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> l(comm->group->mu);
    comm->group->aborted = true;
    comm->group->cv.notify_all();
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* r) {
  if (comm == nullptr || r == nullptr) return ncclInvalidArgument;
  *r = comm->async;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error (cuda_emu)";
    case ncclInvalidArgument:
      return "invalid argument (cuda_emu)";
    case ncclInvalidUsage:
      return "invalid usage: the ranks' collectives differ, or not emulated (cuda_emu)";
    case ncclRemoteError:
      return "remote process exited, aborted or timed out (cuda_emu)";
    default:
      return "error (cuda_emu)";
  }
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (op != ncclSum) return ncclInvalidArgument;  // the one the communicator uses
  return cuda_emu::Collective(comm, NcclEmuGroup::Kind::kAllReduce, send, recv, count, type, 0,
                              stream);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  return cuda_emu::Collective(comm, NcclEmuGroup::Kind::kAllGather, send, recv, count, type, 0,
                              stream);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  return cuda_emu::Collective(comm, NcclEmuGroup::Kind::kBroadcast, send, recv, count, type, root,
                              stream);
}

ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return cuda_emu::PointToPoint(true, const_cast<void*>(buf), count, type, peer, comm, stream);
}

ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return cuda_emu::PointToPoint(false, buf, count, type, peer, comm, stream);
}

ncclResult_t ncclGroupStart() {
  ++cuda_emu::group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (cuda_emu::group_depth == 0) return ncclInvalidUsage;
  if (--cuda_emu::group_depth > 0 || cuda_emu::group_ops.empty()) return ncclSuccess;
  std::vector<cuda_emu::P2p> ops = std::move(cuda_emu::group_ops);
  cuda_emu::group_ops.clear();
  for (const cuda_emu::P2p& p : ops) {
    if (p.stream != ops.front().stream) return ncclInvalidUsage;  // not emulated
  }
  const cudaStream_t stream = ops.front().stream;
  const ncclComm_t comm = ops.front().comm;
  return cuda_emu::Enqueued(comm, stream, [ops = std::move(ops)] { return cuda_emu::RunP2p(ops); });
}
