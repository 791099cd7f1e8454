// RuntimeLora: LoRA adapters loaded and unloaded while a worker serves (vLLM's runtime LoRA
// updating: /v1/load_lora_adapter and /v1/unload_lora_adapter, which a router fans out to its
// workers as the Worker service's LoadLoraAdapter and UnloadLoraAdapter).
//
// Off unless the worker runs with --allow-runtime-lora-updating, which needs --lora-dir: an
// adapter's path is resolved inside that directory (symbolic links and ".." included, so a
// caller can make the worker read nothing else); adapter files are hostile input
// (worker/model/lora_adapter.h). An adapter is read and checked on this object's own thread --
// neither a gRPC thread nor the engine thread waits on the disk -- and then handed to the engine
// thread, which puts it in an empty slot between two steps (EngineLoop::ChangeAdapters).
// Unloading refuses new requests at once; running ones finish with the adapter. What was
// loaded here, and from which path, is listed (Loaded) for a router to load on other workers.
// When the engine serves more adapters than it holds in host memory (--max-cpu-loras), it asks
// for an evicted adapter's directory to be read again (EngineLoop::SetAdapterReader): on the
// same thread, inside lora_dir again (a directory replaced by a link to elsewhere since the load
// is refused).
//
// Thread-safe. The destructor waits for the load in progress and answers the queued ones with
// Unavailable.
#ifndef PAGELLM_WORKER_SERVER_RUNTIME_LORA_H_
#define PAGELLM_WORKER_SERVER_RUNTIME_LORA_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/lora_adapter.h"
#include "worker/server/engine_loop.h"

namespace pagellm {

struct RuntimeLoraOptions {
  bool enabled = false;  // --allow-runtime-lora-updating
  std::string lora_dir;  // --lora-dir: adapters are read from inside it only
  // Reads and checks an adapter for this worker's model (MakeLoraLoader).
  LoraLoader load;
};

// FailedPrecondition: runtime LoRA updating is off (how to turn it on).
absl::Status RuntimeLoraOff();

// `path` (relative to `lora_dir`, or absolute) as a canonical path inside the canonical
// `lora_dir`. NotFound when it does not exist or resolves outside (one answer for both, so that
// a caller cannot probe the host's files).
absl::StatusOr<std::string> ResolveAdapterPath(const std::string& lora_dir,
                                               const std::string& path);

class RuntimeLora {
 public:
  // `done` gets the outcome and the adapters served after it; it runs on this object's thread
  // or the engine thread and must not block.
  using Done = std::function<void(const absl::Status&, const std::vector<std::string>&)>;

  // `loop` is borrowed and must outlive this object. InvalidArgument when enabled without a
  // lora_dir that exists or a loader.
  static absl::StatusOr<std::unique_ptr<RuntimeLora>> Create(EngineLoop* loop,
                                                             RuntimeLoraOptions options);
  ~RuntimeLora();
  RuntimeLora(const RuntimeLora&) = delete;
  RuntimeLora& operator=(const RuntimeLora&) = delete;

  [[nodiscard]] bool enabled() const { return options_.enabled; }
  // FailedPrecondition when not enabled; InvalidArgument for a bad name (the rules of
  // --lora-modules); NotFound for a path outside lora_dir or missing; then the loader's error or
  // the engine's (AlreadyExists, ResourceExhausted, ...), through `done`.
  void Load(std::string name, std::string path, Done done);
  // FailedPrecondition when not enabled; NotFound when the name is not served.
  void Unload(std::string name, Done done);
  // The adapters loaded here and not unloaded since, each with the path its Load gave (as given,
  // not resolved), in load order.
  [[nodiscard]] std::vector<LoraModuleSpec> Loaded() const;

 private:
  RuntimeLora(EngineLoop* loop, RuntimeLoraOptions options);
  void Run();

  EngineLoop* const loop_;
  const RuntimeLoraOptions options_;
  std::string canonical_dir_;

  std::mutex mu_;
  std::condition_variable cv_;
  struct Job {
    LoraModuleSpec spec;
    Done done;                         // a load
    EngineLoop::AdapterReadDone read;  // or a read again for the engine
  };
  // EngineLoop::AdapterReader: queues a read of an adapter loaded here.
  void QueueRead(const LoraModuleSpec& spec, EngineLoop::AdapterReadDone done);
  std::deque<Job> jobs_;  // guarded by mu_
  bool stop_ = false;     // guarded by mu_
  std::thread thread_;    // started when enabled

  mutable std::mutex loaded_mu_;
  std::vector<LoraModuleSpec> loaded_;  // guarded by loaded_mu_; see Loaded()
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_SERVER_RUNTIME_LORA_H_
