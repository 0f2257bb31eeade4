// The 64×64 output tile of the bf16 WMMA GEMMs (cuda_gemm.cu's fallback without cuBLAS, cuda_expert_gemm.cu):
// 4 warps as 2×2 of 32×32, fp32 accumulators; A (64 rows × k) and B (64 rows × k, i.e. column-major k × 64)
// staged in shared memory with a row pitch of LD bf16 values.
#pragma once
#include <cuda_bf16.h>
#include <mma.h>

namespace splash::cuda {

struct WmmaTile {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc[2][2];
  int wm, wn;  // the warp's 32×32 quarter
  __device__ explicit WmmaTile(int warp) : wm(warp / 2), wn(warp % 2) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) nvcuda::wmma::fill_fragment(acc[i][j], 0.f);
  }
  // acc += A[:, 0:KT] · B[:, 0:KT]ᵀ from the staged tiles
  template <int KT, int LD>
  __device__ __forceinline__ void mma(const __nv_bfloat16* sa, const __nv_bfloat16* sb) {
    using namespace nvcuda;
#pragma unroll
    for (int kk = 0; kk < KT; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], sa + (wm * 32 + i * 16) * LD + kk, LD);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], sb + (wn * 32 + j * 16) * LD + kk, LD);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
  }
  // put(m, n, v) for every element (m, n in 0..63 of the tile), through the warp's 16×16 staging area sc
  template <typename Put>
  __device__ __forceinline__ void store(float* sc, int lane, Put put) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        nvcuda::wmma::store_matrix_sync(sc, acc[i][j], 16, nvcuda::wmma::mem_row_major);
        __syncwarp();
        for (int e = lane; e < 256; e += 32) put(wm * 32 + i * 16 + e / 16, wn * 32 + j * 16 + e % 16, sc[e]);
        __syncwarp();
      }
  }
};

}  // namespace splash::cuda
