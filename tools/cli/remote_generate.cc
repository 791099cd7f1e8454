#include "tools/cli/remote_generate.h"

#include <cstdio>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/api/proto_convert.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/generation.grpc.pb.h"

namespace pagellm::cli {
namespace {

SampleResult FromProto(const v1::TokenLogprob& t) {
  SampleResult r;
  r.token_id = t.token_id();
  r.logprob = t.logprob();
  r.rank = t.rank();
  r.num_top_logprobs = std::min<int32_t>(t.top_size(), kMaxLogprobs);
  for (int32_t i = 0; i < r.num_top_logprobs; ++i) {
    r.top_logprobs_storage[i] = {t.top(i).token_id(), t.top(i).logprob()};
  }
  return r;
}

}  // namespace

absl::Status RemoteGenerate(const std::string& server, const std::vector<std::string>& prompts,
                            const v1::SamplingParams& sampling, int32_t per_prompt, bool stream,
                            std::vector<Completion>* done) {
  auto channel = grpc::CreateChannel(server, grpc::InsecureChannelCredentials());
  std::unique_ptr<v1::Generation::Stub> stub = v1::Generation::NewStub(channel);
  std::mutex mu;  // guards `first_error` and stdout
  absl::Status first_error;
  auto run = [&](size_t i) {
    v1::GenerateRequest req;
    req.set_request_id(std::to_string(i));
    req.set_text(prompts[i]);
    *req.mutable_sampling() = sampling;
    grpc::ClientContext ctx;
    auto reader = stub->Generate(&ctx, req);
    v1::GenerateResponse r;
    while (reader->Read(&r)) {
      if (r.embedding_size() > 0) {
        (*done)[i * per_prompt].embedding.assign(r.embedding().begin(), r.embedding().end());
      }
      for (const v1::TokenLogprob& t : r.prompt_logprobs()) {
        (*done)[i * per_prompt].prompt_logprobs.push_back(FromProto(t));
      }
      for (const v1::SampleDelta& d : r.deltas()) {
        if (d.sample_index() < 0 || d.sample_index() >= per_prompt) continue;
        Completion& c = (*done)[i * per_prompt + d.sample_index()];
        c.text += d.text();
        c.token_ids.insert(c.token_ids.end(), d.token_ids().begin(), d.token_ids().end());
        for (const v1::TokenLogprob& t : d.logprobs()) c.logprobs.push_back(FromProto(t));
        if (d.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
          c.finish = FinishReasonFromProto(d.finish_reason());
        }
        if (d.has_cumulative_logprob()) c.cumulative_logprob = d.cumulative_logprob();
        if (stream) {
          std::lock_guard<std::mutex> lock(mu);
          std::fwrite(d.text().data(), 1, d.text().size(), stdout);
          std::fflush(stdout);
        }
      }
    }
    const grpc::Status st = reader->Finish();
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.ok()) {
        first_error = absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                                   absl::StrCat("prompt ", i, ": ", st.error_message()));
      }
    }
  };
  // At most 64 calls in flight: the router queues the rest anyway.
  constexpr size_t kInFlight = 64;
  for (size_t start = 0; start < prompts.size(); start += kInFlight) {
    std::vector<std::thread> threads;
    for (size_t i = start; i < std::min(prompts.size(), start + kInFlight); ++i) {
      threads.emplace_back(run, i);
    }
    for (std::thread& t : threads) t.join();
  }
  return first_error;
}

}  // namespace pagellm::cli
