#include "common/auth/grpc_tls.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagellm {

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream s;
  s << in.rdbuf();
  if (s.str().size() > (1 << 20) || s.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is not a PEM file"));
  }
  return s.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files) {
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (files.cert.empty()) {
    if (!files.client_ca.empty()) {
      return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions options(
      files.client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPemFile(files.cert, "--tls-cert"));
  ASSIGN_OR_RETURN(pair.private_key, ReadPemFile(files.key, "--tls-key"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!files.client_ca.empty()) {
    ASSIGN_OR_RETURN(options.pem_root_certs, ReadPemFile(files.client_ca, "--tls-client-ca"));
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientTlsFiles& files) {
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("--worker-tls-cert and --worker-tls-key go together");
  }
  if (files.ca.empty()) {
    if (!files.cert.empty()) {
      return absl::InvalidArgumentError("--worker-tls-cert needs --worker-tls-ca");
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions options;
  ASSIGN_OR_RETURN(options.pem_root_certs, ReadPemFile(files.ca, "--worker-tls-ca"));
  if (!files.cert.empty()) {
    ASSIGN_OR_RETURN(options.pem_cert_chain, ReadPemFile(files.cert, "--worker-tls-cert"));
    ASSIGN_OR_RETURN(options.pem_private_key, ReadPemFile(files.key, "--worker-tls-key"));
  }
  return grpc::SslCredentials(options);
}

}  // namespace pagellm
