// SecretSet: the bearer secrets a service accepts (the router's API keys, a worker's token),
// checked in constant time.
//
// Secrets are kept only as SHA-256 digests. Contains() hashes the candidate and compares it with
// every digest (CRYPTO_memcmp, no early exit), so neither the timing nor the candidate's length
// tells a client how close it came, or which key matched.
//
// Thread-safe: immutable after construction; share one through std::shared_ptr and swap it
// whole to reload (SIGHUP).
#ifndef PAGELLM_COMMON_AUTH_SECRET_SET_H_
#define PAGELLM_COMMON_AUTH_SECRET_SET_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace pagellm {

// The gRPC metadata key of the worker token: a router sends it on every call to a worker, and a
// worker started with --worker-token refuses calls without it.
inline constexpr char kWorkerTokenHeader[] = "x-pagellm-worker-token";

class SecretSet {
 public:
  // The longest secret accepted (a line of a keys file, a header value).
  static constexpr size_t kMaxSecretBytes = 4096;

  SecretSet() = default;  // empty: Contains() is false for everything

  // InvalidArgument for an empty secret or one longer than kMaxSecretBytes.
  static absl::StatusOr<SecretSet> FromList(const std::vector<std::string>& secrets);
  // One secret per line; blank lines and lines starting with '#' are skipped, surrounding
  // whitespace trimmed. NotFound / InvalidArgument when the file cannot be read or a line is bad
  // (the message gives the line number, never the secret).
  static absl::StatusOr<SecretSet> FromFile(const std::string& path);

  // Adds the secrets of `other`.
  void Merge(const SecretSet& other) {
    digests_.insert(digests_.end(), other.digests_.begin(), other.digests_.end());
  }

  [[nodiscard]] bool empty() const { return digests_.empty(); }
  [[nodiscard]] size_t size() const { return digests_.size(); }
  [[nodiscard]] bool Contains(std::string_view candidate) const;
  // The secret of an "Authorization: Bearer <secret>" value ("" when it is not one).
  static std::string_view BearerToken(std::string_view authorization);

 private:
  std::vector<std::array<uint8_t, 32>> digests_;
};

// A single secret (the worker token) from, in order: `value` (a flag), the first non-blank line
// of the file `path`, the environment variable `env`. "" when none is set. InvalidArgument when
// the file cannot be read or the secret is longer than SecretSet::kMaxSecretBytes.
absl::StatusOr<std::string> ReadSecret(const std::string& value, const std::string& path,
                                       const char* env);

// A SecretSet that may be replaced while requests check it (the router's API keys, reloaded on
// SIGHUP). Thread-safe: one mutex acquisition per check, per request, never per token.
class ReloadableSecrets {
 public:
  void Set(SecretSet secrets) {
    auto next = std::make_shared<const SecretSet>(std::move(secrets));
    absl::MutexLock lock(&mu_);
    secrets_ = std::move(next);
  }
  // True when no secret is configured (the service is open) or `token` is one of them.
  [[nodiscard]] bool Allows(std::string_view token) const {
    std::shared_ptr<const SecretSet> s;
    {
      absl::MutexLock lock(&mu_);
      s = secrets_;
    }
    return s == nullptr || s->empty() || s->Contains(token);
  }
  [[nodiscard]] bool enabled() const {
    absl::MutexLock lock(&mu_);
    return secrets_ != nullptr && !secrets_->empty();
  }

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const SecretSet> secrets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_AUTH_SECRET_SET_H_
