// A Communicator over Gloo's TCP transport (Debian's libgloo): CPU ranks in one process, in
// several processes or on several hosts. Ranks find each other through a rendezvous store
// (rendezvous.h: rank 0 serves one over gRPC; tests may share a gloo HashStore), then every pair
// of ranks holds one TCP connection for the group's life.
//
// Reductions use Gloo's ring all-reduce: each chunk is summed once along the ring and the sum is
// then passed on unchanged, so every rank ends with the same bits.
//
// Not thread-safe (see communicator.h); distinct communicators may be used from distinct threads.
#ifndef PAGELLM_WORKER_DIST_GLOO_COMMUNICATOR_H_
#define PAGELLM_WORKER_DIST_GLOO_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/dist/communicator.h"

namespace gloo::rendezvous {
class Store;
}  // namespace gloo::rendezvous

namespace pagellm {

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  // The address this rank's connections listen on; peers connect to it. Loopback unless the
  // group spans hosts.
  std::string hostname = "127.0.0.1";
  // Bounds joining the group and every collective (communicator.h's contract).
  absl::Duration timeout = absl::Seconds(30);
};

// Joins the group: publishes this rank's address in `store`, waits for every other rank's and
// connects to each. InvalidArgument for a rank outside [0, world_size) or world_size < 1;
// DeadlineExceeded if a rank does not appear within the timeout; Unavailable if the hostname
// does not resolve or a connection fails. `store` is used only during the call.
absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(const GlooOptions& options,
                                                          gloo::rendezvous::Store& store);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_DIST_GLOO_COMMUNICATOR_H_
