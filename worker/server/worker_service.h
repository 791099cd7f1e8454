// WorkerService: the pagellm.v1.Worker gRPC service (callback API) over an EngineLoop. Generate
// streams one request's outputs; GetLoad reports the engine's load for the router; GetModelInfo
// and GetTokenizer let a router work without the weights.
//
// Thread-safe: gRPC calls it from its threads; the engine runs on the loop's thread.
#ifndef PAGELLM_WORKER_SERVER_WORKER_SERVICE_H_
#define PAGELLM_WORKER_SERVER_WORKER_SERVICE_H_

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

#include "common/auth/secret_set.h"
#include "common/tokenizer/tokenizer.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/worker.grpc.pb.h"
#include "worker/server/engine_loop.h"
#include "worker/server/runtime_lora.h"

namespace pagellm {

// Generate is a raw (bytes) method so that a request protobuf cannot parse gets a clear
// INVALID_ARGUMENT naming the problem; the other methods are typed.
class WorkerService final
    : public v1::Worker::WithRawCallbackMethod_Generate<v1::Worker::CallbackService> {
 public:
  // `loop` and `tokenizer` are borrowed and must outlive the service. `health` (may be empty:
  // always healthy) says whether the backend can still run steps; once it fails, Generate and
  // GetLoad answer UNAVAILABLE with its message -- so the router stops sending -- and
  // `on_unhealthy` runs once (the server turns grpc.health.v1 to NOT_SERVING there).
  // With a non-empty `token`, every call must carry it as kWorkerTokenHeader metadata
  // (UNAUTHENTICATED otherwise): only the router, which has it, can use the worker.
  // `lora` (borrowed; may be null: runtime LoRA updating off) serves LoadLoraAdapter and
  // UnloadLoraAdapter.
  WorkerService(EngineLoop* loop, const Tokenizer* tokenizer, v1::ModelInfo info,
                std::function<absl::Status()> health = {}, std::function<void()> on_unhealthy = {},
                SecretSet token = {}, RuntimeLora* lora = nullptr);

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* context,
                                    const v1::GetLoadRequest* request,
                                    v1::WorkerLoad* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* GetTokenizer(grpc::CallbackServerContext* context,
                                         const v1::GetTokenizerRequest* request,
                                         v1::TokenizerSpec* response) override;
  grpc::ServerUnaryReactor* LoadLoraAdapter(grpc::CallbackServerContext* context,
                                            const v1::LoadLoraAdapterRequest* request,
                                            v1::LoraAdaptersResponse* response) override;
  grpc::ServerUnaryReactor* UnloadLoraAdapter(grpc::CallbackServerContext* context,
                                              const v1::UnloadLoraAdapterRequest* request,
                                              v1::LoraAdaptersResponse* response) override;

 private:
  EngineLoop* loop_;
  const Tokenizer* tokenizer_;
  const v1::ModelInfo info_;
  const std::function<absl::Status()> health_;
  const std::function<void()> on_unhealthy_;
  std::once_flag unhealthy_once_;
  std::atomic<uint64_t> next_id_{0};
  const SecretSet token_;
  RuntimeLora* const lora_;
  const uint64_t start_id_;  // WorkerLoad.start_id

  // Whether the call carries the worker token (always, without one).
  [[nodiscard]] bool Trusted(const grpc::CallbackServerContext* context) const;

  // LoadLoraAdapter (with `load_path`) and UnloadLoraAdapter (without).
  grpc::ServerUnaryReactor* ChangeAdapters(grpc::CallbackServerContext* context,
                                           const std::string* load_path, std::string name,
                                           v1::LoraAdaptersResponse* response);

  // OK, or the backend's failure (after running on_unhealthy_ the first time).
  absl::Status CheckHealth();
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_SERVER_WORKER_SERVICE_H_
