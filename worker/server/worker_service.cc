#include "worker/server/worker_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/api/proto_convert.h"
#include "worker/server/generate_stream.h"

namespace pagellm {
namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, const grpc::Status& s) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(s);
  return reactor;
}

}  // namespace

WorkerService::WorkerService(EngineLoop* loop, const Tokenizer* tokenizer, v1::ModelInfo info)
    : loop_(loop), tokenizer_(tokenizer), info_(std::move(info)) {}

grpc::ServerWriteReactor<v1::GenerateResponse>* WorkerService::Generate(
    grpc::CallbackServerContext* context, const v1::WorkerGenerateRequest* request) {
  // Internal ids are unique whatever the clients send; responses carry the client's id.
  std::string id = absl::StrCat("w", next_id_.fetch_add(1, std::memory_order_relaxed));
  std::vector<int32_t> prompt(request->prompt_token_ids().begin(),
                              request->prompt_token_ids().end());
  return new GenerateStream(loop_, std::move(id), request->request_id(), std::move(prompt),
                            SamplingParamsFromProto(request->sampling()));
}

grpc::ServerUnaryReactor* WorkerService::GetLoad(grpc::CallbackServerContext* context,
                                                 const v1::GetLoadRequest*,
                                                 v1::WorkerLoad* response) {
  const EngineLoad l = loop_->load();
  response->set_kv_blocks_total(l.kv_blocks_total);
  response->set_kv_blocks_free(l.kv_blocks_free);
  response->set_swap_blocks_total(l.swap_blocks_total);
  response->set_swap_blocks_free(l.swap_blocks_free);
  response->set_block_size(l.block_size);
  response->set_running(l.running);
  response->set_waiting(l.waiting);
  response->set_swapped(l.swapped);
  response->set_draining(l.draining);
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* WorkerService::GetModelInfo(grpc::CallbackServerContext* context,
                                                      const v1::GetModelInfoRequest*,
                                                      v1::ModelInfo* response) {
  *response = info_;
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* WorkerService::GetTokenizer(grpc::CallbackServerContext* context,
                                                      const v1::GetTokenizerRequest*,
                                                      v1::TokenizerSpec* response) {
  VocabSpecToProto(tokenizer_->spec(), response);
  return Done(context, grpc::Status::OK);
}

}  // namespace pagellm
