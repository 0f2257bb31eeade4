// Standalone kernel self-test and matvec benchmark: `splash_kernel_test [bench rows cols dtype threads]`.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cpu/selftest.h"

int main(int argc, char** argv) {
  using namespace splash::cpu;
  if (argc > 1 && std::string(argv[1]) == "bench") {
    int64_t rows = argc > 2 ? std::atoll(argv[2]) : 8192, cols = argc > 3 ? std::atoll(argv[3]) : 8192;
    std::string dtype = argc > 4 ? argv[4] : "q4";
    int threads = argc > 5 ? std::atoi(argv[5]) : 0;
    const char* isa = argc > 6 ? argv[6] : nullptr;
    for (bool i8 : {true, false}) {
      BenchResult r = bench_matmul(rows, cols, dtype, threads, i8, 50, isa);
      std::printf("%s %lldx%lld %s int8=%d threads=%d: %.3f ms, %.2f GB/s (read %.2f GB/s, memcpy %.2f GB/s)\n",
                  r.isa.c_str(), (long long)rows, (long long)cols, dtype.c_str(), int(i8), r.threads,
                  r.seconds_per_matvec * 1e3, r.matvec_gbps, r.read_gbps, r.memcpy_gbps);
    }
    return 0;
  }
  int bad = 0;
  for (auto& r : kernel_self_test(1234)) {
    std::printf("%-22s %-7s vs %-9s err %.3g tol %.3g %s\n", r.kernel.c_str(), r.isa.c_str(), r.against.c_str(),
                r.max_err, r.tol, r.ok ? "ok" : "FAIL");
    bad += !r.ok;
  }
  std::printf("%d failed\n", bad);
  return bad ? 1 : 0;
}
