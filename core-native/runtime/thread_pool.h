// A fixed pool of std::threads; the calling thread takes part. parallel_for splits [0, n) into one
// contiguous range per thread. Workers spin briefly before sleeping, so back-to-back decode matvecs
// do not pay a futex wake each time. Not re-entrant: one parallel_for at a time per pool.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace splash {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // total threads including the caller; <= 0: hardware cores
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }
  // fn(begin, end, thread_index); ranges are multiples of `align` except the last.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t align = 1);
  // fn(task) for task in [0, n) handed out dynamically (uneven work such as attention heads).
  void parallel_tasks(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  void worker(int index);
  void run(const std::function<void(int)>& job);

  int n_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace splash
