// Test and benchmark entry points of the CPU backend (exposed by the addon as kernelSelfTest and
// benchMatmul; not used by inference).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace splash::cpu {

struct SelfTestResult {
  std::string kernel;  // e.g. "matmul_q4_i8_nt3"
  std::string isa;     // scalar | avx2 | avx512
  std::string against; // "reference" (fp64 dequantised) or "scalar" (same arithmetic path)
  double max_err;      // max |y - ref| / (Σ|w·x| + 1e-30) over rows/tokens
  double tol;
  bool ok;
};
std::vector<SelfTestResult> kernel_self_test(uint32_t seed);

struct BenchResult {
  std::string isa;
  int threads;
  int64_t rows, cols;
  std::string dtype;
  int int8;  // activation levels: 0 fp32, 1 int8, 2 int8x2
  int nt;    // tokens per call
  double weight_bytes;
  double seconds_per_matvec;
  double matvec_gbps;   // weight bytes (incl. scales/biases) / time
  double read_gbps;     // plain parallel read (sum) of a buffer of the same size, same threads
  double memcpy_gbps;   // single-thread memcpy, (read+write bytes) / time
};
// nt > 1: a matmul of nt tokens (seconds_per_matvec is then the fastest call; matvec_gbps counts the weights once).
BenchResult bench_matmul(int64_t rows, int64_t cols, const std::string& dtype, int threads, int int8, int iters,
                         const char* isa, int nt = 1);

}  // namespace splash::cpu
