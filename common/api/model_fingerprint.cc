#include "common/api/model_fingerprint.h"

#include <openssl/evp.h>

#include <memory>

#include "absl/strings/escaping.h"
#include "common/logging.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace pagellm {
namespace {

std::string Deterministic(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

}  // namespace

std::string ModelFingerprint(const v1::ModelInfo& info, const v1::TokenizerSpec& tokenizer) {
  v1::ModelInfo identity;
  identity.set_model_name(info.model_name());
  identity.set_vocab_size(info.vocab_size());
  *identity.mutable_eos_token_ids() = info.eos_token_ids();
  identity.set_chat_template(info.chat_template());
  *identity.mutable_special_tokens() = info.special_tokens();
  if (info.has_default_sampling()) *identity.mutable_default_sampling() = info.default_sampling();
  identity.set_max_tokens_limit(info.max_tokens_limit());
  const std::string a = Deterministic(identity);
  const std::string b = Deterministic(tokenizer);

  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  const bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx.get(), a.data(), a.size()) == 1 &&
                  EVP_DigestUpdate(ctx.get(), "\0", 1) == 1 &&
                  EVP_DigestUpdate(ctx.get(), b.data(), b.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx.get(), digest, &length) == 1;
  PAGELLM_CHECK(ok, "OpenSSL SHA-256 failed");
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

}  // namespace pagellm
