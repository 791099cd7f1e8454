// FakeWorker: an in-process pagellm.v1.Worker gRPC server -- the one fake worker of the router
// tests, the router benchmark and the serving benchmark's tests. It needs no model: Generate
// streams canned tokens (byte-level ids of "a".."z", `tokens_per_message` per message per
// sample, or per beam of a beam search, which it streams as samples; an embedding request gets one
// message with the embedding {prompt length, sum of the prompt's ids, 0.5}; a resumed request goes
// on after its resumed_output_token_ids, or its resumed_samples' unfinished ones, as if it had sent
// them), GetLoad reports a configurable load (its prefix filter only to a caller whose copy is out
// of date, as a worker does), and GetTokenizer serves a tiny hand-built vocabulary (TinyVocab).
// With `serve_generation` it also answers the public pagellm.v1.Generation API (token-id prompts)
// on the same port, as a router would.
//
// Pace: the first message goes out `first_token_delay` after the call arrives, each later one
// `token_interval` after the previous write completed (back to back when zero). One timer thread
// keeps the delays, so many concurrent streams need no thread each.
//
// Faults on demand: fail calls with a status (SetGenerateError, or every `fail_every`-th call),
// stall streams, end them badly (SetEnding), fail GetLoad, die (Kill) and come back on the same
// port (Restart). It records what it saw: requests, cancellations, completed streams, the most
// streams open at once.
//
// Thread-safe: knobs and observations may be used from any thread while it serves.
#ifndef PAGELLM_ROUTER_TESTING_FAKE_WORKER_H_
#define PAGELLM_ROUTER_TESTING_FAKE_WORKER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/vocab_spec.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/worker.pb.h"

namespace pagellm::testing {

class FakeWorker {
 public:
  struct Options {
    std::string address = "127.0.0.1:0";
    // Tokens per stream; 0: the request's max_tokens (16 when unset).
    int tokens_per_request = 0;
    // Tokens per message (the last message may carry fewer).
    int tokens_per_message = 1;
    // Delay before the first message, and between one message's completed write and the next.
    absl::Duration first_token_delay = absl::ZeroDuration();
    absl::Duration token_interval = absl::ZeroDuration();
    // Calls number k, 2k, 3k, ... (counting from 1, both services together) fail at once with
    // `fail_code` ("fake failure"). 0: none fail.
    int fail_every = 0;
    grpc::StatusCode fail_code = grpc::StatusCode::UNAVAILABLE;
    // Also serve pagellm.v1.Generation (Generate with token-id prompts, GetModelInfo).
    bool serve_generation = false;
    // Each delta's text is the steady-clock time it was sent, in ns (for latency benchmarks)
    // instead of the token's text.
    bool stamp_text = false;
    v1::WorkerLoad load = DefaultLoad();
    v1::ModelInfo info = DefaultInfo();
    // Keep the requests seen (requests()); off for benchmarks.
    bool record_requests = true;
  };

  // 256 byte tokens (byte-level BPE, "gpt2" pre-tokenizer) then control tokens <s> (256, BOS,
  // added to text prompts), </s> (257, EOS), <|im_start|> (258), <|im_end|> (259).
  static VocabSpec TinyVocab();
  // A Tokenizer of TinyVocab (the router's view of the fake model).
  static std::unique_ptr<Tokenizer> TinyTokenizer();
  // vocab 260, max_model_len 64, block_size 4, max_parallel_samples 4, no chat template.
  static v1::ModelInfo DefaultInfo();
  // 1000 blocks of 4 tokens, all free.
  static v1::WorkerLoad DefaultLoad();

  // Starts serving; aborts when the address cannot be bound (tests only).
  static std::unique_ptr<FakeWorker> Start(Options options);
  ~FakeWorker();
  FakeWorker(const FakeWorker&) = delete;
  FakeWorker& operator=(const FakeWorker&) = delete;

  // "127.0.0.1:port", stable across Kill/Restart.
  [[nodiscard]] std::string address() const;
  // A new channel to address().
  [[nodiscard]] std::shared_ptr<grpc::Channel> NewChannel() const;

  void SetLoad(const v1::WorkerLoad& load);
  // What GetModelInfo answers from now on (Worker and Generation services).
  void SetInfo(const v1::ModelInfo& info);
  void SetGetLoadFails(bool fails);
  // Generate calls fail at once with `status`; OK restores normal streams.
  void SetGenerateError(const grpc::Status& status);
  // New streams send nothing until cancelled.
  void SetStall(bool stall);
  // How new streams end: as a worker that dies (or whose engine fails) at the worst moment.
  // Each failed ending is the status UNAVAILABLE ("fake: died"), where OK would come.
  enum class Ending {
    kNormal,
    kFailAfterLast,    // every message, the last one (finished, usage) too
    kFailBeforeUsage,  // every token and finish reason, but the last message has no usage
    kAbortMidway,      // after half the tokens: every sample's delta with reason ABORT, no
                       // tokens (what an engine failure sends)
  };
  void SetEnding(Ending ending);
  // Dies: the server stops at once (open streams are cancelled, connections closed).
  void Kill();
  // Serves again on the same port.
  void Restart();

  [[nodiscard]] int generate_calls() const;
  [[nodiscard]] int get_load_calls() const;  // answered ones
  // GetLoad answers that carried the load's prefix_filter (the caller's copy was out of date).
  [[nodiscard]] int prefix_filters_sent() const;
  [[nodiscard]] int cancellations() const;  // streams that saw OnCancel (Kill's included)
  [[nodiscard]] int completed() const;      // streams finished OK
  [[nodiscard]] int active_streams() const;
  [[nodiscard]] int max_concurrent_streams() const;  // the most streams open at once
  [[nodiscard]] int64_t tokens_sent() const;
  [[nodiscard]] std::vector<v1::WorkerGenerateRequest> requests() const;
  // Wait for a condition; false on timeout.
  bool WaitForCancellations(int n, absl::Duration timeout) const;
  bool WaitForActiveStreams(int n, absl::Duration timeout) const;
  bool WaitForGenerateCalls(int n, absl::Duration timeout) const;

  class Impl;

 private:
  explicit FakeWorker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Waits for `cond`, checking it every few milliseconds; false after `timeout`.
bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout = absl::Seconds(5));

// FakeWorker::DefaultLoad() with `free` of `total` KV blocks free.
v1::WorkerLoad Load(int64_t free, int64_t total = 1000);

}  // namespace pagellm::testing

#endif  // PAGELLM_ROUTER_TESTING_FAKE_WORKER_H_
