// The q4 × bf16 tensor-core building blocks shared by the fused q4 GEMM (cuda_qgemm.cu) and the expert-grouped
// GEMM (cuda_expert_gemm.cu): one m16n8k16 multiply, a nibble pair as the bf16 pair 128 + q, and its dequantisation.
//
// The shared operand layout. In PTX's m16n8k16 a thread (g = lane / 4, c = lane % 4) holds A rows g and g + 8 at
// k = 2c, 2c+1 (a0, a1) and 2c+8, 2c+9 (a2, a3), and B column g at the same k. Any permutation of k that both sides
// share gives the same sum, so with the q4 weights as A, thread c takes its rows' 8 bytes at 8c of each 64-column
// group (16 nibbles = columns 16c .. 16c+15). A word's nibbles v0..v7 (bits 4i) go in pairs (v0, v4), (v1, v5),
// (v2, v6), (v3, v7) — nib2 of the word shifted by 0, 4, 8, 12 — and step 2p of the word is a0 = (v2p, v2p+4),
// a2 = (v2p+1, v2p+5). The bf16 activations (B) are stored with every 8 columns in the order 0 4 1 5 2 6 3 7
// (qgemm_act), so B of the same step is the next 8 bytes of the thread's 16-byte load of those 8 columns.
#pragma once
#include <cstdint>

namespace splash::cuda {

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// A bf16 pair 128 + q (0x4300 | q: exact) → s·q + b: minus 128 is exact, and the last fma rounds once.
__device__ __forceinline__ uint32_t deq2(uint32_t v, uint32_t s2, uint32_t b2) {
  uint32_t q;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(q) : "r"(v), "r"(0x3F803F80u), "r"(0xC300C300u));
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(v) : "r"(q), "r"(s2), "r"(b2));
  return v;
}
// (w & 0x000F000F) | 0x43004300 as one lop3: the bf16 pair 128 + q of the nibbles at bits 0 and 16 (written as C++,
// the mask-and-or compiled to two LOP3: 32 more in each kernel, 872 → 840 instructions in all for 8 tokens)
__device__ __forceinline__ uint32_t nib2(uint32_t w) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(w), "n"(0x000F000F), "r"(0x43004300u));
  return r;
}
__device__ __forceinline__ uint32_t pair16(uint16_t v) { return uint32_t(v) | (uint32_t(v) << 16); }  // in both halves

}  // namespace splash::cuda
