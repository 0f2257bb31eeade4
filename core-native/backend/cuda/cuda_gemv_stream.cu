// The int8x2 dp4a GEMV of q4 / q8 weights for launches of 1 and 2 tokens (decode steps, 2-token verify blocks and
// batches; up to 4 with CudaOptions::gemv_stream = 4, 0 = never), with each warp's weights streamed through shared
// memory. The dp4a kernel of gemv_q.cuh holds its loads in
// registers, so the bytes in flight per SM are bounded by its registers: ~2.2–2.5 TB/s on the 27B shapes' matrices
// against ~4 TB/s on the LM head, whose long grid hides the ramp. Here every warp keeps kStreamStages stages of its
// four rows in flight with cp.async (q4: 2.3 KB a stage, 32 chunks of 32 columns per row, with their scales and
// biases), issued before the wait on the kernel that produces the activations (programmatic dependent launch: the
// weights do not depend on it).
//
// The arithmetic is gemv_q_dot, in the same order (a lane takes chunks lane, lane + 32, ...; one stage is chunk
// lane + 32·k of each row), so the rows are the dp4a kernel's bits. Columns a multiple of 1024 (whole stages),
// 16-byte aligned weights, scales and biases; otherwise the caller runs the dp4a kernel.
//
// Few-row fp32 GEMVs on the same activations (the GDN's b/a, with their gates) may ride in the launch: its first
// blocks run gemv_f_row.cuh on the fp32 activations instead, so they start in the first wave and do not take a
// launch of their own.
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/gemv_f_row.cuh"

namespace splash::cuda {
namespace {

constexpr int kStreamWarps = 4, kStreamRows = 4, kStreamStages = 4;
constexpr int kRowsPre = 4;  // the riding rows' weights read before the wait: 4 · 8 · 128 = 4096 columns

// One stage of a warp: the 16-byte pieces of its rows' chunks, piece p of the lane's chunk at (p·32 + lane)·16
// (consecutive lanes, consecutive lines), then 16 scales and 16 biases (bf16) per row.
template <int BITS>
struct StreamStage {
  static constexpr int kPieces = kStreamRows * BITS / 4;
  static constexpr int kWBytes = kPieces * 32 * 16, kSBytes = kStreamRows * 16 * 2;
  static constexpr int kBytes = kWBytes + 2 * kSBytes;
  static constexpr size_t kBlock = size_t(kStreamWarps) * kStreamStages * kBytes;
};

template <int BITS, int NT>
__global__ void __launch_bounds__(32 * kStreamWarps) k_gemv_stream(GemvGroup grp, const int8_t* xq, const float* xs,
                                                                   const float* xsum, int64_t lvl2, int32_t nt,
                                                                   GemvGroup rows, const float* xf, RowGates gates) {
  pdl_trigger();  // the kernel after this one may be scheduled now; it waits for this one before it touches anything
  const int32_t nrows = rows.n > 0 ? rows.first[rows.n] : 0;
  if (int32_t(blockIdx.x) < nrows) {
    gemv_f_row_block<NT, 32 * kStreamWarps, kRowsPre>(rows, int32_t(blockIdx.x), xf, nt, gates);
    return;
  }
  using L = StreamStage<BITS>;
  constexpr int ROWS = kStreamRows;
  extern __shared__ __align__(16) uint8_t stream_smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint8_t* const mine = stream_smem + size_t(warp) * kStreamStages * L::kBytes;
  splash_weight w;
  float* y;
  int64_t ys;
  const int32_t bx = gemv_group_of(grp, int32_t(blockIdx.x) - nrows, w, y, ys);
  const int64_t r0 = (int64_t(bx) * kStreamWarps + warp) * ROWS;
  const int64_t R = w.rows, C = w.cols, nch = C / 32, G = C / 64, row_bytes = C * BITS / 8;
  if (r0 >= R) return;
  const int nk = int(nch / 32);
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  auto issue = [&](int k) {
    if (k < nk) {
      uint8_t* st = mine + (k % kStreamStages) * L::kBytes;
#pragma unroll
      for (int i = 0; i < ROWS; ++i) {
        const uint8_t* src = base + min(r0 + i, R - 1) * row_bytes + (int64_t(k) * 32 + lane) * (4 * BITS);
#pragma unroll
        for (int q = 0; q < BITS / 4; ++q) cp16(st + ((i * (BITS / 4) + q) * 32 + lane) * 16, src + q * 16, true);
      }
      if (lane < 4 * ROWS) {  // row lane / 4: scales (halves 0, 1) and biases (halves 0, 1)
        const int i = lane >> 2, part = lane & 3;
        const uint16_t* src = (part < 2 ? w.scales : w.biases) + min(r0 + i, R - 1) * G + k * 16 + (part & 1) * 8;
        cp16(st + L::kWBytes + (part >> 1) * L::kSBytes + i * 32 + (part & 1) * 16, src, true);
      }
    }
    cp_commit();  // an empty group past the last stage keeps the count the wait below expects
  };
#pragma unroll
  for (int k = 0; k < kStreamStages - 1; ++k) issue(k);
  pdl_wait();  // the activations come from the kernel before this one
  float acc[ROWS][NT];
#pragma unroll
  for (int i = 0; i < ROWS; ++i)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[i][t] = 0.f;
  for (int k = 0; k < nk; ++k) {
    issue(k + kStreamStages - 1);
    cp_wait<kStreamStages - 1>();
    __syncwarp();  // the scales were copied by other lanes
    const uint8_t* st = mine + (k % kStreamStages) * L::kBytes;
    uint4 wv[ROWS][BITS / 4];
    float s[ROWS], b[ROWS];
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
#pragma unroll
      for (int q = 0; q < BITS / 4; ++q)
        wv[i][q] = *reinterpret_cast<const uint4*>(st + ((i * (BITS / 4) + q) * 32 + lane) * 16);
      const uint16_t* sc = reinterpret_cast<const uint16_t*>(st + L::kWBytes) + i * 16 + lane / 2;
      s[i] = bf16f(sc[0]);
      b[i] = bf16f(sc[L::kSBytes / 2]);
    }
    gemv_q_dot<BITS, NT, ROWS>(acc, wv, s, b, C, nch, int64_t(k) * 32 + lane, xq, xs, xsum, lvl2, nt);
    __syncwarp();  // every lane is done with this stage before it is refilled
  }
  gemv_q_store<NT, ROWS>(acc, y, ys, r0, R, nt, lane);
}

template <int BITS, int NT>
void launch_stream(Ctx* c, GemvGroup& grp, const int8_t* xq, const float* xs, const float* xsum, int64_t lvl2,
                   int32_t nt, const GemvGroup& rows, const float* xf, RowGates gates) {
  constexpr size_t bytes = StreamStage<BITS>::kBlock;
  if (!smem_opt_in<k_gemv_stream<BITS, NT>>(c, bytes, "gemv_stream smem")) return;
  const int32_t nrows = rows.n > 0 ? rows.first[rows.n] : 0;
  launch_pdl(c, k_gemv_stream<BITS, NT>, dim3(unsigned(nrows + grp.first[grp.n])), dim3(32 * kStreamWarps), bytes, grp,
             xq, xs, xsum, lvl2, nt, rows, xf, gates);
}

}  // namespace

bool gemv_q_stream(Ctx* c, int bits, GemvGroup& grp, const int8_t* xq, const float* xs, const float* xsum, int64_t lvl2,
                   int32_t nt, GemvGroup* rows, const float* xf) {
  // (kernel_choice.h choose_gemv_form has checked the tokens, the options and the weights' alignment)
  grp.first[0] = 0;
  for (int g = 0; g < grp.n; ++g)
    grp.first[g + 1] = grp.first[g] + int32_t(blocks_for(grp.w[g].rows, kStreamWarps * kStreamRows));
  GemvGroup none{};
  RowGates gates{};
  if (rows && rows->n > 0) {  // a block per row, ahead of the q4/q8 blocks; the gates are this launch's now
    rows->first[0] = 0;
    for (int g = 0; g < rows->n; ++g) rows->first[g + 1] = rows->first[g] + int32_t(rows->w[g].rows);
    gates = c->row_gates;
    c->row_gates = RowGates{};
  }
  const GemvGroup& r = rows ? *rows : none;
  const bool q4 = bits == 4;
  switch (nt) {
    case 1: q4 ? launch_stream<4, 1>(c, grp, xq, xs, xsum, lvl2, nt, r, xf, gates) : launch_stream<8, 1>(c, grp, xq, xs, xsum, lvl2, nt, r, xf, gates); break;
    case 2: q4 ? launch_stream<4, 2>(c, grp, xq, xs, xsum, lvl2, nt, r, xf, gates) : launch_stream<8, 2>(c, grp, xq, xs, xsum, lvl2, nt, r, xf, gates); break;
    default: q4 ? launch_stream<4, 4>(c, grp, xq, xs, xsum, lvl2, nt, r, xf, gates) : launch_stream<8, 4>(c, grp, xq, xs, xsum, lvl2, nt, r, xf, gates);
  }  // 3 and 4 tokens only when CudaOptions::gemv_stream says so (measured slower: 127 registers, fewer warps)
  if (rows) rows->n = 0;  // launched
  return true;
}

}  // namespace splash::cuda
