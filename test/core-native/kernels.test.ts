// Every matmul path (scalar / AVX2 / AVX-512 where this CPU has them; fp32 and int8 activations for
// q4/q8) against an fp64 reference with the dequantised weights, and each SIMD path against the
// scalar path with the same arithmetic. Errors are relative to Σ|w·x| of the row.
// Tolerances: fp32 paths 1e-5; int8 paths 5e-2 and int8x2 paths 2e-4 vs the reference (an outlier of 40σ
// coarsens its group), 1e-5 vs the scalar path with the same arithmetic.
import t from 'tap'
import {native} from '../../src/native/native.js'

t.test('kernel self-test', async (t) => {
  const isas = native.isaList()
  t.ok(isas.includes('scalar'))
  for (const seed of [1, 2]) {
    const res = await native.kernelSelfTest(seed)
    t.ok(res.length >= 20)
    for (const isa of isas) t.ok(res.some((r) => r.isa === isa), `${isa} was tested`)
    for (const r of res) t.ok(r.ok, `${r.kernel} ${r.isa} vs ${r.against}: ${r.maxErr.toExponential(2)} <= ${r.tol}`)
  }
})

t.test('a forced ISA the CPU lacks is refused with a code', async (t) => {
  if (native.isaList().includes('avx512')) return t.pass('this CPU has AVX-512')
  await t.rejects(native.benchMatmul({rows: 64, cols: 64, isa: 'avx512', iters: 1}), {code: 'unsupported'})
})

t.test('benchMatmul reports numbers (no timing assertions)', async (t) => {
  const r = await native.benchMatmul({rows: 256, cols: 512, dtype: 'q4', iters: 2})
  t.ok(r.matvecGBps > 0 && r.readGBps > 0 && r.memcpyGBps > 0)
  t.equal(r.weightBytes, 256 * 256 + 2 * 2 * 256 * 8)
})

// runMatmul against plain TypeScript: fp64 with the dequantised weights (fp32 paths), and the exact int8
// formula Σ_g s_g·sx_g·Σ q·xq + b_g·Σ x_g with xq = round(x·127/amax) (int8 paths).
import {quantize, dequantize, toBf16, fromBf16} from '../../src/package/builder/quantize.js'
import {rng} from './helpers/tiny-package.js'

// levels 2 (int8x2): the residual x − sc·q is quantised again with step sc/256.
function fakeQuantDot(w: Float32Array, bias: Float32Array, x: Float32Array, cols: number, r: number, levels = 1): number {
  const f = Math.fround
  let s = 0
  for (let g = 0; g < cols; g += 64) {
    let amax = 0
    for (let j = 0; j < 64; j++) amax = Math.max(amax, Math.abs(x[g + j]))
    const sc = f(amax / 127)
    const inv = amax > 0 ? f(127 / amax) : 0
    const sc2 = f(sc / 256)
    const inv2 = sc2 > 0 ? f(1 / sc2) : 0
    for (let j = 0; j < 64; j++) {
      const q = Math.min(127, Math.max(-127, Math.round(f(x[g + j] * inv))))
      let xq = q * sc
      if (levels === 2) {
        const q2 = Math.min(127, Math.max(-127, Math.round(f(f(x[g + j] - f(sc * q)) * inv2))))
        xq += q2 * sc2
      }
      s += w[r * cols + g + j] * xq + bias[r * (cols / 64) + g / 64] * (x[g + j] - xq)
    }
  }
  return s
}

t.test('runMatmul: every ISA and path against TypeScript', async (t) => {
  const r = rng(21)
  for (const [rows, cols, nt] of [[5, 64, 1], [130, 128, 3], [33, 448, 2], [256, 64, 4]]) {
    const w32 = Float32Array.from({length: rows * cols}, () => r.normal() / 8)
    const x = Float32Array.from({length: nt * cols}, () => r.normal())
    for (const dtype of ['f32', 'bf16', 'q8', 'q4'] as const) {
      let weight: Float32Array | Uint16Array | Uint32Array
      let deq: Float32Array
      let scales: Uint16Array | undefined
      let biases: Uint16Array | undefined
      if (dtype === 'f32') [weight, deq] = [w32, w32]
      else if (dtype === 'bf16') {
        weight = toBf16(w32)
        deq = fromBf16(weight)
      } else {
        const q = quantize(w32, rows, cols, dtype === 'q4' ? 4 : 8)
        ;[weight, scales, biases] = [q.weight, q.scales, q.biases]
        deq = dequantize(q, rows, cols, dtype === 'q4' ? 4 : 8)
      }
      for (const isa of native.isaList()) {
        for (const levels of dtype.startsWith('q') ? [0, 1, 2] : [0]) {
          const int8 = levels > 0
          for (const exact of int8 ? [false, true] : [false]) {
            const y = native.runMatmul({dtype, rows, cols, weight, scales, biases, x, nt, int8, int8x2: levels === 2, isa, exact})
            let worst = 0
            let mag = 1e-30
            for (let tk = 0; tk < nt; tk++) {
              const xt = x.subarray(tk * cols, (tk + 1) * cols)
              for (let i = 0; i < rows; i++) {
                let want = 0
                if (int8 && !exact) want = fakeQuantDot(deq, fromBf16(biases!), xt, cols, i, levels)
                else for (let c = 0; c < cols; c++) want += deq[i * cols + c] * xt[c]
                worst = Math.max(worst, Math.abs(y[tk * rows + i] - want))
                mag = Math.max(mag, Math.abs(want))
              }
            }
            const mode = levels === 2 ? ' int8x2' : ' int8'
            const label = `${dtype} ${rows}x${cols} nt=${nt} ${isa}${int8 ? (exact ? `${mode} model, EXACT weight` : mode) : ''}`
            t.ok(worst / mag < 2e-5, `${label}: ${(worst / mag).toExponential(2)} < 2e-5`)
          }
        }
      }
    }
  }
  t.throws(() => native.runMatmul({dtype: 'q4', rows: 2, cols: 60, weight: new Uint32Array(15), x: new Float32Array(60), nt: 1}),
    {code: 'invalid_argument'})
  t.throws(() => native.runMatmul({dtype: 'f32', rows: 2, cols: 4, weight: new Float32Array(7), x: new Float32Array(4), nt: 1}),
    {code: 'invalid_argument'})
})

// Batch invariance through the addon: an n-token matmul gives every token exactly the bits of a one-token
// matmul of that token (odd row and token counts; the tile kernels take up to four tokens at a time).
t.test('runMatmul: n tokens equal n one-token calls bit for bit, every ISA and mode', async (t) => {
  const r = rng(33)
  for (const [rows, cols, nt] of [[37, 320, 7], [6, 128, 5], [130, 64, 16]]) {
    const w32 = Float32Array.from({length: rows * cols}, () => r.normal() / 8)
    const x = Float32Array.from({length: nt * cols}, () => r.normal())
    for (const bits of [4, 8] as const) {
      const q = quantize(w32, rows, cols, bits)
      const dtype = bits === 4 ? 'q4' as const : 'q8' as const
      for (const isa of native.isaList()) {
        for (const levels of [0, 1, 2]) {
          const opts = {dtype, rows, cols, weight: q.weight, scales: q.scales, biases: q.biases, int8: levels > 0, int8x2: levels === 2, isa}
          const all = native.runMatmul({...opts, x, nt})
          let bad = 0
          for (let tk = 0; tk < nt; tk++) {
            const one = native.runMatmul({...opts, x: x.slice(tk * cols, (tk + 1) * cols), nt: 1})
            const a = new Uint32Array(all.buffer, all.byteOffset + tk * rows * 4, rows)
            const b = new Uint32Array(one.buffer, one.byteOffset, rows)
            for (let i = 0; i < rows; i++) if (a[i] !== b[i]) bad++
          }
          t.equal(bad, 0, `${dtype} ${rows}x${cols} nt=${nt} ${isa} levels=${levels}: identical bits`)
        }
      }
    }
  }
})
