// ThreadPool: a fixed set of worker threads for data-parallel kernels.
//
// ParallelFor splits [0, n) into one contiguous chunk per thread (the caller runs chunk 0) and
// returns when all chunks are done. Workers spin briefly between calls (a decode step issues
// hundreds of short parallel regions) and then sleep on a futex. Nothing is allocated per call.
//
// Thread-safety: ParallelFor must be called from one thread at a time (the engine thread); it is
// not reentrant (a task must not call ParallelFor on the same pool).
#ifndef PAGELLM_KERNELS_CPU_THREAD_POOL_H_
#define PAGELLM_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace pagellm::kernels {

class ThreadPool {
 public:
  // `num_threads` counts the calling thread; 1 means no workers. Values < 1 are taken as 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end, thread_index) on disjoint chunks covering [0, n). Chunk boundaries
  // depend only on n and num_threads(). Blocks until every chunk has run.
  template <typename Fn>
  void ParallelFor(int64_t n, Fn&& fn) {
    if (n <= 0) return;
    if (num_threads_ == 1 || n == 1) {
      fn(int64_t{0}, n, 0);
      return;
    }
    Thunk thunk = [](void* ctx, int64_t b, int64_t e, int t) {
      (*static_cast<std::remove_reference_t<Fn>*>(ctx))(b, e, t);
    };
    Run(n, thunk, static_cast<void*>(&fn));
  }

 private:
  using Thunk = void (*)(void*, int64_t, int64_t, int);
  void Run(int64_t n, Thunk thunk, void* ctx);
  void WorkerLoop(int index);
  void RunChunk(int index);

  const int num_threads_;
  std::vector<std::thread> workers_;
  // Current job; written by the caller before `generation_` is bumped.
  int64_t job_n_ = 0;
  Thunk job_thunk_ = nullptr;
  void* job_ctx_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

// For jobs whose units (row groups, panels) are laid end to end -- job j has size(j) of them --
// calls fn(j, lo, hi) for the part [lo, hi) of job j's units that falls in [begin, end): how a
// ParallelFor chunk over several products of one input splits into per-product ranges.
template <typename Size, typename Fn>
void ForEachJobRange(int num_jobs, Size&& size, int64_t begin, int64_t end, Fn&& fn) {
  int64_t offset = 0;
  for (int j = 0; j < num_jobs && offset < end; ++j) {
    const int64_t n = size(j);
    const int64_t lo = begin > offset ? begin : offset, hi = end < offset + n ? end : offset + n;
    if (lo < hi) fn(j, lo - offset, hi - offset);
    offset += n;
  }
}

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_CPU_THREAD_POOL_H_
