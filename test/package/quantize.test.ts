import t from 'tap'
import {bf16Bits, bf16Value, bitsOf, dequantize, fromBf16, quantize, toBf16} from '../../src/package/builder/quantize.js'

t.test('bf16 rounds to nearest even', async t => {
  t.equal(bf16Bits(1), 0x3f80)
  t.equal(bf16Bits(-2), 0xc000)
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1)
  t.equal(bf16Bits(1 + 2 ** -8), 0x3f80)
  // 1 + 3·2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up
  t.equal(bf16Bits(1 + 3 * 2 ** -8), 0x3f82)
  t.equal(bf16Bits(1 + 2 ** -8 + 2 ** -12), 0x3f81, 'above half rounds up')
  t.ok(Number.isNaN(bf16Value(bf16Bits(NaN))))
  t.equal(bf16Value(bf16Bits(Infinity)), Infinity)
  const a = new Float32Array([0.1, -3.5, 65504, 1e-20])
  t.same([...toBf16(a)], [...a].map(bf16Bits))
  t.same([...fromBf16(toBf16(new Float32Array([1.5, -0.25])))], [1.5, -0.25])
})

t.test('affine q4/q8 in MLX layout', async t => {
  const rows = 3
  const cols = 128
  const w = new Float32Array(rows * cols).map((_, i) => Math.sin(i * 0.37) * (1 + (i % 7)))
  for (const bits of [4, 8] as const) {
    const q = quantize(w, rows, cols, bits)
    t.equal(q.weight.length, (rows * cols * bits) / 32)
    t.equal(q.scales.length, rows * 2)
    t.equal(bitsOf((cols * bits) / 32, cols / 64), bits)
    const d = dequantize(q, rows, cols, bits)
    const s = fromBf16(q.scales)
    const b = fromBf16(q.biases)
    let ok = true
    for (let i = 0; i < w.length; i++) {
      const g = Math.floor(i / 64)
      if (Math.abs(d[i] - w[i]) > s[g] / 2 + Math.abs(b[g]) / 128 + 1e-6) ok = false
    }
    t.ok(ok, `q${bits} within half a step`)
    // layout: element c of row r sits at bits (bits·(c mod 32/bits)) of word c·bits/32, first element lowest
    const per = 32 / bits
    const q0 = q.weight[0] & ((1 << bits) - 1)
    t.equal(s[0] * q0 + b[0], d[0])
    const q1 = (q.weight[0] >>> bits) & ((1 << bits) - 1)
    t.equal(s[0] * q1 + b[0], d[1])
    t.equal(per * q.weight.length, rows * cols)
  }
  // a constant group: scale 0, exact
  const c = quantize(new Float32Array(64).fill(0.5), 1, 64, 4)
  t.same([...dequantize(c, 1, 64, 4)], new Array(64).fill(0.5))
  t.throws(() => quantize(new Float32Array(60), 1, 60, 4), /groups of 64/)
})
