#include "common/auth/secret_set.h"

#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "openssl/crypto.h"
#include "openssl/sha.h"

namespace pagellm {
namespace {

std::array<uint8_t, 32> Digest(std::string_view s) {
  std::array<uint8_t, 32> d;
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d.data());
  return d;
}

}  // namespace

absl::StatusOr<SecretSet> SecretSet::FromList(const std::vector<std::string>& secrets) {
  SecretSet set;
  for (size_t i = 0; i < secrets.size(); ++i) {
    if (secrets[i].empty() || secrets[i].size() > kMaxSecretBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("secret ", i + 1, " is empty or longer than ", kMaxSecretBytes, " bytes"));
    }
    set.digests_.push_back(Digest(secrets[i]));
  }
  return set;
}

absl::StatusOr<SecretSet> SecretSet::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<std::string> secrets;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.size() > kMaxSecretBytes + 256) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": line too long"));
    }
    absl::string_view s = absl::StripAsciiWhitespace(line);
    if (s.empty() || absl::StartsWith(s, "#")) continue;
    secrets.emplace_back(s);
  }
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
  absl::StatusOr<SecretSet> set = FromList(secrets);
  if (!set.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", set.status().message()));
  return set;
}

absl::StatusOr<std::string> ReadSecret(const std::string& value, const std::string& path,
                                       const char* env) {
  std::string secret = value;
  if (secret.empty() && !path.empty()) {
    std::ifstream in(path);
    if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
    std::string line;
    while (secret.empty() && std::getline(in, line)) {
      if (line.size() > SecretSet::kMaxSecretBytes + 256) break;
      secret = std::string(absl::StripAsciiWhitespace(line));
    }
  }
  if (secret.empty() && env != nullptr) {
    if (const char* e = std::getenv(env); e != nullptr) {
      secret = std::string(absl::StripAsciiWhitespace(e));
    }
  }
  if (secret.size() > SecretSet::kMaxSecretBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the secret is longer than ", SecretSet::kMaxSecretBytes, " bytes"));
  }
  return secret;
}

bool SecretSet::Contains(std::string_view candidate) const {
  if (candidate.empty() || candidate.size() > kMaxSecretBytes) return false;
  const std::array<uint8_t, 32> d = Digest(candidate);
  bool found = false;
  for (const auto& digest : digests_) {
    found |= CRYPTO_memcmp(d.data(), digest.data(), d.size()) == 0;
  }
  return found;
}

std::string_view SecretSet::BearerToken(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() ||
      !absl::EqualsIgnoreCase(absl::string_view(authorization.data(), kBearer.size()),
                              absl::string_view(kBearer.data(), kBearer.size()))) {
    return {};
  }
  std::string_view token = authorization.substr(kBearer.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return token;
}

}  // namespace pagellm
