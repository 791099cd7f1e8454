// Conversions between the wire types of proto/pagellm/v1 and the C++ types of the engine, used
// by both services. The conversions do not validate; callers validate the result
// (SamplingParams::Validate, Tokenizer::Create) because only they know the model's limits.
#ifndef PAGELLM_COMMON_API_PROTO_CONVERT_H_
#define PAGELLM_COMMON_API_PROTO_CONVERT_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/sampling/finish_reason.h"
#include "common/sampling/sampling_params.h"
#include "common/tokenizer/vocab_spec.h"
#include "grpcpp/support/status.h"
#include "pagellm/v1/generation.pb.h"
#include "pagellm/v1/worker.pb.h"

namespace pagellm {

// Unset optional fields keep SamplingParams' defaults.
SamplingParams SamplingParamsFromProto(const v1::SamplingParams& p);

// Every field set explicitly (so the receiver applies exactly these values).
void SamplingParamsToProto(const SamplingParams& s, v1::SamplingParams* out);

v1::FinishReason FinishReasonToProto(FinishReason reason);
FinishReason FinishReasonFromProto(v1::FinishReason reason);

void VocabSpecToProto(const VocabSpec& spec, v1::TokenizerSpec* out);
// InvalidArgument for an unknown model or token type (a worker of a newer version).
absl::StatusOr<VocabSpec> VocabSpecFromProto(const v1::TokenizerSpec& p);

// absl and gRPC share the canonical status codes; messages are kept.
grpc::Status ToGrpcStatus(const absl::Status& s);
absl::Status FromGrpcStatus(const grpc::Status& s);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_API_PROTO_CONVERT_H_
