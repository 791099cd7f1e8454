// gRPC credentials from PEM files, for the router's public listener, the workers' listeners and
// the router's channels to workers (TLS, optionally mutual).
//
// Thread-safe: pure functions (they read the files once).
#ifndef PAGELLM_COMMON_AUTH_GRPC_TLS_H_
#define PAGELLM_COMMON_AUTH_GRPC_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace pagellm {

struct ServerTlsFiles {
  std::string cert;       // PEM chain; empty: plaintext (insecure credentials)
  std::string key;        // PEM private key of `cert`
  std::string client_ca;  // PEM CA bundle; non-empty: clients must present a certificate it signed
};

struct ClientTlsFiles {
  std::string ca;    // PEM CA bundle the server's certificate must chain to; empty: plaintext
  std::string cert;  // optional client certificate (mutual TLS) ...
  std::string key;   // ... and its key
  std::string server_name;  // optional: the name to verify instead of the target's host
};

// InvalidArgument naming the file that cannot be read or a key without its certificate.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientTlsFiles& files);

// Reads a whole (small) file; InvalidArgument naming `flag` when it cannot.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const char* flag);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_AUTH_GRPC_TLS_H_
