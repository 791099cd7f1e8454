#include "router/lora_fanout.h"

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/api/proto_convert.h"
#include "common/logging.h"

namespace pagellm {
namespace {

// What the calls of one change share; the last call to end reports.
struct FanOut {
  WorkerPool* pool;
  LoraChangeRequest change;
  std::function<void(absl::Status)> done;
  std::atomic<int> left{0};
  int total = 0;
  absl::Mutex mu;
  int failed = 0;            // guarded by mu
  absl::Status first_error;  // guarded by mu

  void Finish() {
    absl::Status outcome;
    {
      absl::MutexLock lock(&mu);
      if (failed > 0) {
        outcome = absl::Status(first_error.code(),
                               absl::StrCat(failed, " of ", total, " workers refused to ",
                                            change.load ? "load" : "unload", " LoRA adapter '",
                                            change.lora_name, "': ", first_error.message()));
      }
    }
    PLOG_INFO("LoRA adapter {} {}: {} of {} workers", change.lora_name,
              change.load ? "loaded" : "unloaded", total - failed, total);
    done(std::move(outcome));
  }
};

// One worker's call.
struct Call {
  std::shared_ptr<FanOut> fan;
  std::shared_ptr<WorkerEndpoint> worker;
  grpc::ClientContext context;
  v1::LoadLoraAdapterRequest load;
  v1::UnloadLoraAdapterRequest unload;
  v1::LoraAdaptersResponse response;

  void OnDone(const grpc::Status& status) {
    std::unique_ptr<Call> owned(this);
    const absl::Status st = FromGrpcStatus(status);
    if (st.ok()) {
      // What the worker serves now (a failed call carries no response: its polls tell).
      fan->pool->SetAdapters(worker.get(),
                             {response.lora_adapters().begin(), response.lora_adapters().end()});
    } else if (st.code() == absl::StatusCode::kUnavailable) {
      fan->pool->ReportUnavailable(worker.get());
    }
    if (!st.ok()) {
      absl::MutexLock lock(&fan->mu);
      if (fan->failed++ == 0) fan->first_error = st;
    }
    if (fan->left.fetch_sub(1) == 1) fan->Finish();
  }
};

}  // namespace

void ChangeWorkerAdapters(WorkerPool* pool, const LoraChangeRequest& change, absl::Duration timeout,
                          std::function<void(absl::Status)> done) {
  ChangeAdaptersOn(pool, pool->ReadyEndpoints(), change, timeout, std::move(done));
}

void ChangeAdaptersOn(WorkerPool* pool, const std::vector<std::shared_ptr<WorkerEndpoint>>& workers,
                      const LoraChangeRequest& change, absl::Duration timeout,
                      std::function<void(absl::Status)> done) {
  if (workers.empty()) {
    done(absl::UnavailableError("no worker is available"));
    return;
  }
  auto fan = std::make_shared<FanOut>();
  fan->pool = pool;
  fan->change = change;
  fan->done = std::move(done);
  fan->total = static_cast<int>(workers.size());
  fan->left = fan->total;
  for (const std::shared_ptr<WorkerEndpoint>& w : workers) {
    auto* call = new Call;
    call->fan = fan;
    call->worker = w;
    call->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    w->Prepare(&call->context);
    if (change.load) {
      call->load.set_lora_name(change.lora_name);
      call->load.set_lora_path(change.lora_path);
      w->stub().async()->LoadLoraAdapter(&call->context, &call->load, &call->response,
                                         [call](grpc::Status s) { call->OnDone(s); });
    } else {
      call->unload.set_lora_name(change.lora_name);
      w->stub().async()->UnloadLoraAdapter(&call->context, &call->unload, &call->response,
                                           [call](grpc::Status s) { call->OnDone(s); });
    }
  }
}

}  // namespace pagellm
