#include "runtime/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define SPLASH_PAUSE() _mm_pause()
#else
#define SPLASH_PAUSE() std::this_thread::yield()
#endif

namespace splash {

ThreadPool::ThreadPool(int threads) {
  n_ = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::run_chunks(Job& job, int index) {
  for (int64_t b; (b = job.next.fetch_add(job.chunk, std::memory_order_relaxed)) < job.n;)
    (*job.fn)(b, std::min(job.n, b + job.chunk), index);
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  while (true) {
    // spin ~1–3 ms before sleeping: long enough to stay awake through a decode step's serial stretches (small
    // matmuls run on the caller alone) and the engine's work between steps. With 4000 spins (~0.1 ms) the default
    // package's workers slept inside every step, and each parallel op after that paid a futex wake and waited for
    // the worker to be scheduled (perf: ~5 % of decode in futex wakes and sched_yield). Decode, draft off, this
    // 2-core machine: 992 / 961 → 1044 / 1197 tok/s, at 0.4–0.5 ms more CPU per token (the spinning).
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < 40000) {
      SPLASH_PAUSE();
      ++spins;
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_) return;
    // join the job only while it is open (the caller closes it once every chunk is taken)
    active_.fetch_add(1, std::memory_order_seq_cst);
    if (open_.load(std::memory_order_seq_cst) && generation_.load(std::memory_order_seq_cst) == seen) {
      Job* job = job_;
      run_chunks(*job, index);
    }
    active_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t align) {
  if (n <= 0) return;
  align = std::max<int64_t>(1, align);
  const int64_t units = (n + align - 1) / align;
  if (n_ == 1 || units <= 1) {
    fn(0, n, 0);
    return;
  }
  Job job;
  job.fn = &fn;
  job.n = n;
  // ~8 chunks per thread: enough to rebalance around a descheduled thread, few enough to stay cheap
  job.chunk = std::max<int64_t>(1, units / (int64_t(n_) * 8)) * align;
  dispatch(job);
}

void ThreadPool::dispatch(Job& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &job;
    open_.store(true, std::memory_order_seq_cst);
    generation_.fetch_add(1, std::memory_order_seq_cst);
  }
  cv_.notify_all();
  run_chunks(job, 0);  // the calling thread is worker 0
  open_.store(false, std::memory_order_seq_cst);
  int spins = 0;
  while (active_.load(std::memory_order_seq_cst) != 0) {
    if (++spins < 2000) SPLASH_PAUSE();
    else std::this_thread::yield();
  }
}

void ThreadPool::parallel_tasks(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (n == 1 || n_ == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::function<void(int64_t, int64_t, int)> f = [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) fn(i);
  };
  Job job;
  job.fn = &f;
  job.n = n;
  job.chunk = 1;
  dispatch(job);
}

}  // namespace splash
