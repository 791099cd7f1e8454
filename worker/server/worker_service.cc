#include "worker/server/worker_service.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/api/proto_convert.h"
#include "common/api/request_limits.h"
#include "common/api/wire_request.h"
#include "common/logging.h"
#include "worker/server/generate_stream.h"

namespace pagellm {
namespace {

uint64_t RandomStartId() {
  std::random_device entropy;
  return ((uint64_t{entropy()} << 32) | entropy()) | 1;  // never 0 (unknown)
}

const grpc::Status& Untrusted() {
  static const grpc::Status s(grpc::StatusCode::UNAUTHENTICATED,
                              "this worker serves its router only (the worker token is missing or "
                              "wrong)");
  return s;
}

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, const grpc::Status& s) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(s);
  return reactor;
}

}  // namespace

WorkerService::WorkerService(EngineLoop* loop, const Tokenizer* tokenizer, v1::ModelInfo info,
                             std::function<absl::Status()> health,
                             std::function<void()> on_unhealthy, SecretSet token, RuntimeLora* lora)
    : loop_(loop),
      tokenizer_(tokenizer),
      info_(std::move(info)),
      health_(std::move(health)),
      on_unhealthy_(std::move(on_unhealthy)),
      token_(std::move(token)),
      lora_(lora),
      start_id_(RandomStartId()) {}

bool WorkerService::Trusted(const grpc::CallbackServerContext* context) const {
  if (token_.empty()) return true;
  const auto& metadata = context->client_metadata();
  auto it = metadata.find(kWorkerTokenHeader);
  return it != metadata.end() &&
         token_.Contains(std::string_view(it->second.data(), it->second.size()));
}

absl::Status WorkerService::CheckHealth() {
  if (!health_) return absl::OkStatus();
  absl::Status s = health_();
  if (s.ok()) return s;
  std::call_once(unhealthy_once_, [&] {
    PLOG_ERROR("backend failed, not serving: {}", s.ToString());
    if (on_unhealthy_) on_unhealthy_();
  });
  return absl::UnavailableError(s.message());
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* WorkerService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* wire) {
  v1::WorkerGenerateRequest request;
  if (!Trusted(context)) return new GenerateStream(loop_, FromGrpcStatus(Untrusted()));
  if (absl::Status s = CheckHealth(); !s.ok()) return new GenerateStream(loop_, s);
  if (absl::Status s = ParseRequestWire(*wire, &request); !s.ok()) {
    return new GenerateStream(loop_, s);
  }
  if (absl::Status s = CheckMaxBytes(request.request_id(), kMaxWorkerRequestIdBytes, "request_id");
      !s.ok()) {
    return new GenerateStream(loop_, s);
  }
  // Internal ids are unique whatever the clients send; responses carry the client's id.
  std::string id = absl::StrCat("w", next_id_.fetch_add(1, std::memory_order_relaxed));
  std::vector<int32_t> prompt(request.prompt_token_ids().begin(), request.prompt_token_ids().end());
  // Several samples: resumed_samples (resumed_output_token_ids then holds them all, for older
  // workers to refuse); one: resumed_output_token_ids.
  ResumedOutput resumed;
  if (request.resumed_samples_size() > 0) {
    resumed.samples.reserve(request.resumed_samples_size());
    for (const v1::ResumedSample& s : request.resumed_samples()) {
      resumed.samples.push_back(
          {std::vector<int32_t>(s.token_ids().begin(), s.token_ids().end()), s.finished()});
    }
  } else {
    resumed = ResumedOutput::OneSample(std::vector<int32_t>(
        request.resumed_output_token_ids().begin(), request.resumed_output_token_ids().end()));
  }
  return new GenerateStream(loop_, std::move(id), std::move(*request.mutable_request_id()),
                            std::move(prompt), SamplingParamsFromProto(request.sampling()),
                            std::move(resumed));
}

grpc::ServerUnaryReactor* WorkerService::GetLoad(grpc::CallbackServerContext* context,
                                                 const v1::GetLoadRequest* request,
                                                 v1::WorkerLoad* response) {
  if (!Trusted(context)) return Done(context, Untrusted());
  if (absl::Status s = CheckHealth(); !s.ok()) {
    return Done(context, grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(s.message())));
  }
  const EngineLoad l = loop_->load();
  response->set_kv_blocks_total(l.kv_blocks_total);
  response->set_kv_blocks_free(l.kv_blocks_free);
  response->set_swap_blocks_total(l.swap_blocks_total);
  response->set_swap_blocks_free(l.swap_blocks_free);
  response->set_block_size(l.block_size);
  response->set_running(l.running);
  response->set_waiting(l.waiting);
  response->set_swapped(l.swapped);
  response->set_max_num_seqs(static_cast<int32_t>(std::min<int64_t>(l.max_num_seqs, INT32_MAX)));
  response->set_draining(l.draining);
  response->set_start_id(start_id_);
  response->set_model_fingerprint(info_.model_fingerprint());
  response->set_max_model_len(info_.max_model_len());
  response->set_max_parallel_samples(info_.max_parallel_samples());
  for (std::string& name : loop_->served_adapters()) response->add_lora_adapters(std::move(name));
  if (lora_ != nullptr) {
    for (LoraModuleSpec& spec : lora_->Loaded()) {
      v1::LoadLoraAdapterRequest* a = response->add_runtime_lora_adapters();
      a->set_lora_name(std::move(spec.name));
      a->set_lora_path(std::move(spec.path));
    }
  }
  if (const CountingPrefixFilter* filter = loop_->prefix_filter(); filter != nullptr) {
    response->set_prefix_filter_hashes(kPrefixFilterHashes);
    if (filter->version() == request->prefix_filter_version()) {
      response->set_prefix_filter_version(request->prefix_filter_version());
    } else {
      response->set_prefix_filter_version(filter->Snapshot(response->mutable_prefix_filter()));
    }
  }
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* WorkerService::GetModelInfo(grpc::CallbackServerContext* context,
                                                      const v1::GetModelInfoRequest*,
                                                      v1::ModelInfo* response) {
  if (!Trusted(context)) return Done(context, Untrusted());
  *response = info_;
  response->clear_lora_adapters();
  for (std::string& name : loop_->served_adapters()) response->add_lora_adapters(std::move(name));
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* WorkerService::GetTokenizer(grpc::CallbackServerContext* context,
                                                      const v1::GetTokenizerRequest*,
                                                      v1::TokenizerSpec* response) {
  if (!Trusted(context)) return Done(context, Untrusted());
  VocabSpecToProto(tokenizer_->spec(), response);
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* WorkerService::ChangeAdapters(grpc::CallbackServerContext* context,
                                                        const std::string* load_path,
                                                        std::string name,
                                                        v1::LoraAdaptersResponse* response) {
  if (!Trusted(context)) return Done(context, Untrusted());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  RuntimeLora::Done done = [reactor, response](const absl::Status& st,
                                               const std::vector<std::string>& served) {
    for (const std::string& n : served) response->add_lora_adapters(n);
    reactor->Finish(ToGrpcStatus(st));
  };
  if (lora_ == nullptr) {
    done(RuntimeLoraOff(), loop_->served_adapters());
  } else if (load_path != nullptr) {
    lora_->Load(std::move(name), *load_path, std::move(done));
  } else {
    lora_->Unload(std::move(name), std::move(done));
  }
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::LoadLoraAdapter(grpc::CallbackServerContext* context,
                                                         const v1::LoadLoraAdapterRequest* request,
                                                         v1::LoraAdaptersResponse* response) {
  return ChangeAdapters(context, &request->lora_path(), request->lora_name(), response);
}

grpc::ServerUnaryReactor* WorkerService::UnloadLoraAdapter(
    grpc::CallbackServerContext* context, const v1::UnloadLoraAdapterRequest* request,
    v1::LoraAdaptersResponse* response) {
  return ChangeAdapters(context, nullptr, request->lora_name(), response);
}

}  // namespace pagellm
