// Communicator: the collectives the ranks of one tensor-parallel group run in lockstep (issue 12).
// Rank 0 owns the engine and broadcasts each step; every rank runs its shard of the forward pass
// and sums partial results with AllReduceSum.
//
// Implementations: gloo_communicator.h (CPU ranks over TCP, Debian's libgloo). A group of one
// (world size 1) needs no library: MakeSingleRankCommunicator().
//
// Contract for every collective:
//   - All ranks call the same collectives in the same order with the same sizes (the step's
//     broadcast makes the order the same everywhere). A mismatch is a programming error that
//     surfaces as a timeout, never as silently wrong data.
//   - Buffers are host memory (a device communicator would document its own).
//   - Every call returns within the communicator's timeout: DeadlineExceeded when a peer did not
//     take part in time, Unavailable when a peer's connection failed (the process died). After a
//     failure the group is broken: every later call fails at once with the first error, so one
//     dead rank fails the group's requests instead of hanging them.
//   - Every rank ends a reduction with the same bits.
//
// Not thread-safe: one thread (the engine's, or a follower's step loop) makes every call.
#ifndef PAGELLM_WORKER_DIST_COMMUNICATOR_H_
#define PAGELLM_WORKER_DIST_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace pagellm {

class Communicator {
 public:
  virtual ~Communicator() = default;

  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int world_size() const = 0;

  // data[0, n) becomes the element-wise sum of every rank's data[0, n).
  virtual absl::Status AllReduceSum(float* data, int64_t n) = 0;

  // out[r * n, (r + 1) * n) gets rank r's in[0, n), for every r. REQUIRES: out holds
  // world_size() * n floats and does not overlap in.
  virtual absl::Status AllGather(const float* in, int64_t n, float* out) = 0;

  // On root, out[r * n, (r + 1) * n) gets rank r's in[0, n), for every r; `out` is not used on
  // the other ranks (may be null). REQUIRES on root: out holds world_size() * n floats and does
  // not overlap in.
  virtual absl::Status Gather(const float* in, int64_t n, float* out, int root) = 0;

  // Every rank's data[0, bytes) becomes root's.
  virtual absl::Status Broadcast(void* data, int64_t bytes, int root) = 0;

  // Returns once every rank has called Barrier.
  virtual absl::Status Barrier() = 0;

  // Broadcast of a message whose length only root knows: the length first, then the bytes.
  // Followers' *bytes is replaced. InvalidArgument if root's message exceeds max_bytes (checked
  // by every rank, so a follower never allocates more than max_bytes).
  absl::Status BroadcastBytes(std::string* bytes, int root, int64_t max_bytes);

  // Seconds spent in collectives so far, waiting included (the cost tensor parallelism adds to
  // a step). Same thread as the collectives.
  [[nodiscard]] double collective_seconds() const { return collective_seconds_; }

 protected:
  void AddCollectiveSeconds(double s) { collective_seconds_ += s; }

 private:
  double collective_seconds_ = 0;
};

// A group of one: every collective is the identity and never fails.
std::unique_ptr<Communicator> MakeSingleRankCommunicator();

}  // namespace pagellm

#endif  // PAGELLM_WORKER_DIST_COMMUNICATOR_H_
