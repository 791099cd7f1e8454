// GenerateStream: one Worker.Generate call. It is both the gRPC write reactor (one write in
// flight, Finish exactly once after the last write) and, through a shared Sink, the
// EngineLoop's RequestSink, which may outlive the reactor: once gRPC is done with the call the
// sink drops whatever the engine still sends.
//
// Threading: the engine thread calls the sink; gRPC threads call the reactor methods. A mutex
// guards the queue; reactor operations are started outside it.
#ifndef PAGELLM_WORKER_SERVER_GENERATE_STREAM_H_
#define PAGELLM_WORKER_SERVER_GENERATE_STREAM_H_

#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "grpcpp/grpcpp.h"
#include "pagellm/v1/generation.pb.h"
#include "worker/server/engine_loop.h"

namespace pagellm {

// The method is raw (ByteBuffer) so that a request protobuf cannot parse gets a clear
// INVALID_ARGUMENT (common/api/wire_request.h); responses are serialized here, one at a time.
class GenerateStream : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // Starts the call: `loop` (borrowed, outlives every call) gets the request under
  // `internal_id`; responses carry `client_id`. `resumed`: EngineLoop::Submit's.
  GenerateStream(EngineLoop* loop, std::string internal_id, std::string client_id,
                 std::vector<int32_t> prompt_ids, SamplingParams params,
                 ResumedOutput resumed = {});
  // A call refused before it reached the engine: finishes with `error` (REQUIRES: not OK).
  GenerateStream(EngineLoop* loop, const absl::Status& error);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class Sink;
  EngineLoop* loop_;
  std::string internal_id_;
  std::shared_ptr<Sink> sink_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_SERVER_GENERATE_STREAM_H_
