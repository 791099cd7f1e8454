#include "worker/server/generate_stream.h"

#include <utility>

#include "common/api/proto_convert.h"
#include "common/logging.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace pagellm {

namespace {

void ToProto(const SampleResult& lp, v1::TokenLogprob* t) {
  t->set_token_id(lp.token_id);
  t->set_logprob(lp.logprob);
  t->set_rank(lp.rank);
  for (const TokenLogprob& top : lp.top_logprobs()) {
    v1::TopLogprob* tp = t->add_top();
    tp->set_token_id(top.token_id);
    tp->set_logprob(top.logprob);
  }
}

}  // namespace

// The queue between the engine thread and the reactor.
class GenerateStream::Sink : public RequestSink {
 public:
  // `prompt_ids`: sent on the first message (prompt logprobs were asked for), or empty.
  Sink(GenerateStream* reactor, std::string client_id, std::vector<int32_t> prompt_ids = {})
      : reactor_(reactor), client_id_(std::move(client_id)), prompt_ids_(std::move(prompt_ids)) {}

  void OnOutputs(std::span<const SequenceOutput> outputs) override {
    v1::GenerateResponse r;
    r.set_request_id(client_id_);
    if (!prompt_ids_.empty()) {
      r.mutable_prompt_token_ids()->Add(prompt_ids_.begin(), prompt_ids_.end());
      prompt_ids_ = {};
    }
    for (const SequenceOutput& o : outputs) {
      for (const SampleResult& lp : o.prompt_logprobs) ToProto(lp, r.add_prompt_logprobs());
      if (o.only_prompt_logprobs()) continue;
      if (!o.embedding.empty()) {  // an embedding request's result: no delta
        r.mutable_embedding()->Add(o.embedding.begin(), o.embedding.end());
        continue;
      }
      v1::SampleDelta* d = r.add_deltas();
      d->set_sample_index(o.sample_index);
      d->set_text(o.text);
      d->mutable_token_ids()->Add(o.new_token_ids.begin(), o.new_token_ids.end());
      for (const SampleResult& lp : o.logprobs) ToProto(lp, d->add_logprobs());
      d->set_finish_reason(FinishReasonToProto(o.finish_reason));
      if (o.finished() && o.cumulative_logprob != 0.0) {
        d->set_cumulative_logprob(o.cumulative_logprob);
      }
    }
    Push(std::move(r), std::nullopt);
  }

  void OnDone(const absl::Status& status, int64_t prompt_tokens,
              int64_t completion_tokens) override {
    std::optional<v1::GenerateResponse> last;
    if (status.ok()) {
      last.emplace();
      last->set_request_id(client_id_);
      last->set_finished(true);
      last->mutable_usage()->set_prompt_tokens(static_cast<int32_t>(prompt_tokens));
      last->mutable_usage()->set_completion_tokens(static_cast<int32_t>(completion_tokens));
    }
    Push(std::move(last), ToGrpcStatus(status));
  }

  // Reactor side.
  void WriteDone(bool ok) {
    std::unique_lock<std::mutex> lock(mu_);
    in_flight_ = false;
    if (!ok) queue_.clear();  // the client is gone; OnCancel follows
    Advance(std::move(lock));
  }
  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    reactor_ = nullptr;
    queue_.clear();
  }

 private:
  void Push(std::optional<v1::GenerateResponse> r, std::optional<grpc::Status> done) {
    std::unique_lock<std::mutex> lock(mu_);
    if (reactor_ == nullptr) return;
    if (r.has_value()) queue_.push_back(*std::move(r));
    if (done.has_value()) done_ = *std::move(done);
    Advance(std::move(lock));
  }

  // Starts the next write, or Finish once everything is written. Reactor calls happen after the
  // lock is released (a reaction may run inline).
  void Advance(std::unique_lock<std::mutex> lock) {
    if (reactor_ == nullptr || in_flight_ || finished_) return;
    GenerateStream* reactor = reactor_;
    if (!queue_.empty()) {
      bool own = false;
      current_.Clear();  // the previous write is done with it
      const grpc::Status st = grpc::SerializationTraits<v1::GenerateResponse>::Serialize(
          queue_.front(), &current_, &own);
      PAGELLM_CHECK(st.ok(), "cannot serialize a GenerateResponse: {}", st.error_message());
      queue_.pop_front();
      in_flight_ = true;
      lock.unlock();
      reactor->StartWrite(&current_);
      return;
    }
    if (done_.has_value()) {
      finished_ = true;
      const grpc::Status status = *done_;
      lock.unlock();
      reactor->Finish(status);
    }
  }

  std::mutex mu_;
  GenerateStream* reactor_;  // null once gRPC is done with the call
  const std::string client_id_;
  std::vector<int32_t> prompt_ids_;  // engine thread only
  std::deque<v1::GenerateResponse> queue_;
  grpc::ByteBuffer current_;  // being written; stable while in_flight_
  bool in_flight_ = false;
  bool finished_ = false;
  std::optional<grpc::Status> done_;
};

GenerateStream::GenerateStream(EngineLoop* loop, std::string internal_id, std::string client_id,
                               std::vector<int32_t> prompt_ids, SamplingParams params,
                               ResumedOutput resumed)
    : loop_(loop),
      internal_id_(std::move(internal_id)),
      sink_(std::make_shared<Sink>(
          this, std::move(client_id),
          params.prompt_logprobs.has_value() ? prompt_ids : std::vector<int32_t>())) {
  const absl::Status st = loop_->Submit(internal_id_, std::move(prompt_ids), std::move(params),
                                        sink_, std::move(resumed));
  if (!st.ok()) sink_->OnDone(st, 0, 0);
}

GenerateStream::GenerateStream(EngineLoop* loop, const absl::Status& error)
    : loop_(loop), sink_(std::make_shared<Sink>(this, std::string())) {
  sink_->OnDone(error, 0, 0);
}

void GenerateStream::OnWriteDone(bool ok) { sink_->WriteDone(ok); }

void GenerateStream::OnCancel() { loop_->Cancel(internal_id_); }

void GenerateStream::OnDone() {
  sink_->Detach();
  delete this;
}

}  // namespace pagellm
