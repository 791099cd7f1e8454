// How the ranks of a tensor-parallel group find each other: rank 0 runs a RendezvousServer (a
// small key-value store behind the pagellm.v1.Rendezvous gRPC service) at the group's
// `--dist-init host:port`, and every rank, rank 0 included, reaches it through
// MakeRendezvousStore(), the gloo::rendezvous::Store that ConnectGloo() takes. Only connection
// addresses pass through it, once, at start.
//
// Bounded: keys, key and value sizes and the keys of one Get are capped (Options), so a stray
// client cannot grow the server's memory; Set of a key over the cap is InvalidArgument or
// ResourceExhausted, and a Get waits at most max_wait.
//
// Thread-safe.
#ifndef PAGELLM_WORKER_DIST_RENDEZVOUS_H_
#define PAGELLM_WORKER_DIST_RENDEZVOUS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gloo::rendezvous {
class Store;
}  // namespace gloo::rendezvous

namespace grpc {
class Server;
}  // namespace grpc

namespace pagellm {

class RendezvousService;

class RendezvousServer {
 public:
  struct Options {
    std::string listen_address = "127.0.0.1:0";  // port 0 picks a free one
    int64_t max_keys = 1024;
    int64_t max_key_bytes = 256;
    int64_t max_value_bytes = 256 << 10;
    int64_t max_keys_per_get = 256;
    absl::Duration max_wait = absl::Minutes(5);  // a Get's wait, whatever its deadline
  };

  // Unavailable if the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(const Options& options);
  // Shutdown().
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // The bound port.
  [[nodiscard]] int port() const { return port_; }

  // Wakes every waiting Get (they end UNAVAILABLE) and stops the server. Idempotent.
  void Shutdown();

 private:
  RendezvousServer() = default;

  std::unique_ptr<RendezvousService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// A gloo store over the RendezvousServer at `target` ("host:port"). Each call waits for the
// server to be reachable and for the keys it reads, for at most `timeout`; on failure it throws
// gloo::IoException (what Gloo expects of a store), whose message says "timeout" when the time
// ran out.
std::unique_ptr<gloo::rendezvous::Store> MakeRendezvousStore(const std::string& target,
                                                             absl::Duration timeout);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_DIST_RENDEZVOUS_H_
