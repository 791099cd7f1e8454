// Probes for end-to-end tests of a gRPC server, without generated stubs for the standard
// services (Debian ships no grpc.health.v1 / reflection headers): messages are encoded by hand
// and parsed with protobuf's UnknownFieldSet.
//
// Thread-safe: each call is independent.
#ifndef PAGELLM_COMMON_TESTING_GRPC_PROBE_H_
#define PAGELLM_COMMON_TESTING_GRPC_PROBE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace pagellm::testing {

enum class HealthStatus { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

// grpc.health.v1.Health/Check for `service` ("" = the whole server). The RPC's error otherwise.
absl::StatusOr<HealthStatus> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                         const std::string& service);

// The service names server reflection (grpc.reflection.v1alpha) lists.
absl::StatusOr<std::vector<std::string>> ListServices(
    const std::shared_ptr<grpc::Channel>& channel);

// Calls `method` ("/pkg.Service/Method") with `request` as the raw message bytes, as a unary
// call (for a server-streaming method this sees its status when it sends no message). Returns
// the call's status; *response gets the reply's bytes when it is OK.
grpc::Status CallRaw(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     const std::string& request, std::string* response);

// Body of an HTTP/1.0 GET of http://127.0.0.1:port/path; Unavailable on a socket error or a
// status other than 200.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

}  // namespace pagellm::testing

#endif  // PAGELLM_COMMON_TESTING_GRPC_PROBE_H_
