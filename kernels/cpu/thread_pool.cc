// Design: the caller publishes a job (n, thunk, ctx), increments `generation_` (release) and
// runs chunk 0 itself. Each worker waits for the generation to change (spinning ~50 us, then
// futex wait through std::atomic::wait), runs its chunk and decrements `pending_`. The caller
// spins until `pending_` is zero, so a job's fields are never rewritten while a worker reads them.
#include "kernels/cpu/thread_pool.h"

#include <immintrin.h>

#include <chrono>

namespace pagellm::kernels {

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads < 1 ? 1 : num_threads) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::RunChunk(int index) {
  const int64_t begin = job_n_ * index / num_threads_;
  const int64_t end = job_n_ * (index + 1) / num_threads_;
  if (begin < end) job_thunk_(job_ctx_, begin, end, index);
}

void ThreadPool::Run(int64_t n, Thunk thunk, void* ctx) {
  job_n_ = n;
  job_thunk_ = thunk;
  job_ctx_ = ctx;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  RunChunk(0);
  // Spin, then yield: on an oversubscribed machine a pure spin would hold the core the
  // straggling worker needs.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::WorkerLoop(int index) {
  uint32_t seen = 0;  // the generation at construction; Run() may already have bumped it
  while (true) {
    // Spin for a short while: decode steps issue many short jobs back to back.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    uint32_t g;
    int spins = 0;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < 2048) {
        _mm_pause();
      } else {
        std::this_thread::yield();
      }
      if (spins % 256 == 0 && std::chrono::steady_clock::now() > deadline) {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    RunChunk(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace pagellm::kernels
