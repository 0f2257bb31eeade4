// A fixed pool of std::threads; the calling thread takes part. Work is handed out in chunks through an
// atomic counter, so a thread the OS has descheduled (2 cores shared with other processes) simply takes
// fewer chunks, and the caller never waits for a worker that has not started yet: workers join a job
// only while it is open. Workers spin briefly before sleeping so back-to-back decode matvecs do not pay a
// futex wake each time. One parallel_for at a time per pool (the model serialises steps).
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
  // fn(begin, end, thread_index) over chunks of [0, n); chunk bounds are multiples of `align`.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t align = 1);
  // fn(task) for task in [0, n), one task per grab.
  void parallel_tasks(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  struct Job {
    const std::function<void(int64_t, int64_t, int)>* fn;
    int64_t n, chunk;
    std::atomic<int64_t> next{0};
  };
  void worker(int index);
  void run_chunks(Job& job, int index);
  /** Publishes a job to the workers, runs its share on the calling thread, and waits until every worker is out. */
  void dispatch(Job& job);

  int n_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  Job* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};
  std::atomic<bool> open_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace splash
