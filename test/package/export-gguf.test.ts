// The GGUF writer: header layout, alignment, tensor data offsets, Q4_0/Q8_0 block round trips, and an export of the
// tiny package read back with a small GGUF parser written here from the format description.
import t from 'tap'
import {existsSync, mkdtempSync, readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {
  BLOCK, GGUF_ALIGNMENT, GGUF_MAGIC, GgmlType, GgufType, dequantizeQ4_0, dequantizeQ8_0, exportGguf, f16Bits, f16Value,
  ggufHeader, kv, quantizeQ4_0, quantizeQ8_0, tensorBytes, vHeadOrder,
} from '../../src/package/export/export-gguf.js'
import {synthPackage} from '../../src/package/synth/synth.js'
import {root as cliRoot, runCli} from '../helpers/cli.js'

interface Parsed {
  version: number
  kv: Map<string, unknown>
  tensors: {name: string; ne: number[]; type: number; offset: number}[]
  dataStart: number
}

function parse(buf: Buffer): Parsed {
  let at = 0
  const u32 = () => ((at += 4), buf.readUInt32LE(at - 4))
  const u64 = () => ((at += 8), Number(buf.readBigUInt64LE(at - 8)))
  const str = () => {
    const n = u64()
    at += n
    return buf.toString('utf8', at - n, at)
  }
  const value = (type: number): unknown => {
    switch (type) {
      case GgufType.UINT32: return u32()
      case GgufType.INT32: return ((at += 4), buf.readInt32LE(at - 4))
      case GgufType.FLOAT32: return ((at += 4), buf.readFloatLE(at - 4))
      case GgufType.BOOL: return buf[at++] !== 0
      case GgufType.STRING: return str()
      case GgufType.UINT64: return u64()
      case GgufType.ARRAY: {
        const it = u32()
        const n = u64()
        return Array.from({length: n}, () => value(it))
      }
      default: throw new Error(`type ${type}`)
    }
  }
  if (u32() !== GGUF_MAGIC) throw new Error('magic')
  const version = u32()
  const nt = u64()
  const nkv = u64()
  const kvs = new Map<string, unknown>()
  for (let i = 0; i < nkv; i++) {
    const k = str()
    kvs.set(k, value(u32()))
  }
  const tensors: Parsed['tensors'] = []
  for (let i = 0; i < nt; i++) {
    const name = str()
    const nd = u32()
    const ne = Array.from({length: nd}, () => u64())
    tensors.push({name, ne, type: u32(), offset: u64()})
  }
  const alignment = Number(kvs.get('general.alignment') ?? 32)
  return {version, kv: kvs, tensors, dataStart: Math.ceil(at / alignment) * alignment}
}

t.test('header: magic, version, counts, key/values, tensor infos, aligned offsets', async t => {
  const tensors = [
    {name: 'a', ne: [3], type: GgmlType.F32},
    {name: 'b', ne: [64, 2], type: GgmlType.Q8_0},
    {name: 'c', ne: [32, 3], type: GgmlType.Q4_0},
  ]
  const {header, offsets, dataBytes} = ggufHeader(
    [['general.architecture', kv.str('qwen35')], ['x.n', kv.u32(7)], ['x.eps', kv.f32(1e-6)], ['x.sec', kv.arr(GgufType.INT32, [11, 11, 10, 0])], ['x.t', kv.arr(GgufType.STRING, ['a', 'bc'])], ['x.b', kv.bool(false)]],
    tensors,
  )
  t.equal(header.length % GGUF_ALIGNMENT, 0)
  t.equal(header.readUInt32LE(0), GGUF_MAGIC)
  t.equal(header.toString('ascii', 0, 4), 'GGUF')
  const p = parse(header)
  t.equal(p.version, 3)
  t.equal(p.kv.get('general.architecture'), 'qwen35')
  t.equal(p.kv.get('x.n'), 7)
  t.same(p.kv.get('x.sec'), [11, 11, 10, 0])
  t.same(p.kv.get('x.t'), ['a', 'bc'])
  t.equal(p.kv.get('x.b'), false)
  t.same(p.tensors.map(x => x.name), ['a', 'b', 'c'])
  t.same(p.tensors[1].ne, [64, 2])
  t.equal(p.tensors[2].type, GgmlType.Q4_0)
  t.equal(p.dataStart, header.length)
  // a: 12 bytes → next at 32; b: 2 rows × 2 blocks × 34 = 136 → 168 → 192; c: 3 × 18 = 54
  t.same(offsets, [0, 32, 192])
  t.same(p.tensors.map(x => x.offset), offsets)
  t.ok(offsets.every(o => o % GGUF_ALIGNMENT === 0))
  t.equal(dataBytes, 192 + 64)
  t.equal(tensorBytes({ne: [64, 2], type: GgmlType.Q8_0}), 136)
  t.throws(() => tensorBytes({ne: [48], type: GgmlType.Q4_0}))
})

t.test('f16 bits round trip', async t => {
  for (const x of [0, 1, -2, 0.5, 65504, 1e-5, -3.140625, 6.1e-5]) t.ok(Math.abs(f16Value(f16Bits(x)) - x) <= Math.abs(x) * 1e-3 + 1e-7, String(x))
  t.equal(f16Bits(1), 0x3c00)
  t.equal(f16Bits(-2), 0xc000)
})

t.test('Q8_0 and Q4_0 blocks round trip within half a step', async t => {
  const n = BLOCK * 8
  const x = new Float32Array(n)
  for (let i = 0; i < n; i++) x[i] = Math.sin(i * 1.7) * (1 + (i % 5))
  const q8 = quantizeQ8_0(x)
  t.equal(q8.length, (n / BLOCK) * 34)
  const y8 = dequantizeQ8_0(q8, n)
  const q4 = quantizeQ4_0(x)
  t.equal(q4.length, (n / BLOCK) * 18)
  const y4 = dequantizeQ4_0(q4, n)
  for (let b = 0; b < n / BLOCK; b++) {
    const blk = x.subarray(b * BLOCK, (b + 1) * BLOCK)
    const amax = Math.max(...blk.map(Math.abs))
    for (let j = 0; j < BLOCK; j++) {
      const i = b * BLOCK + j
      if (Math.abs(y8[i] - x[i]) > (amax / 127) * 0.5 + amax * 1e-3) t.fail(`q8 ${i}: ${x[i]} → ${y8[i]}`)
      // Q4_0 steps are amax/8; values on the side opposite the extreme clamp at 7 steps, so the bound is one step.
      if (Math.abs(y4[i] - x[i]) > amax / 8 + amax * 2e-3) t.fail(`q4 ${i}: ${x[i]} → ${y4[i]}`)
    }
    // The extreme value of the block survives exactly (up to f16 rounding of d).
    const k = blk.findIndex(v => Math.abs(v) === amax)
    t.ok(Math.abs(y4[b * BLOCK + k] - blk[k]) <= amax * 1e-3, `block ${b} extreme`)
  }
  // A known block: ggml layout, low nibble = element j, high nibble = element j+16.
  const ramp = Float32Array.from({length: 32}, (_, i) => i - 16) // max magnitude −16 → d = 2
  const r = quantizeQ4_0(ramp)
  t.equal(f16Value(r.readUInt16LE(0)), 2)
  t.equal(r[2] & 15, 0) // −16/2 + 8 = 0
  t.equal(r[2] >> 4, 8) // element 16: 0/2 + 8
  t.same(Array.from(dequantizeQ4_0(r, 32)).slice(0, 3), [-16, -14, -14]) // −15/2+8.5 = 1 → trunc 1 → −14
})

t.test('V-head order: grouped by K head → tiled', async t => {
  // 2 K heads, 2 V per K, head dim 1: old [g0v0, g0v1, g1v0, g1v1] → new [g0v0, g1v0, g0v1, g1v1]
  t.same(Array.from(vHeadOrder(2, 2, 1)), [0, 2, 1, 3])
  t.same(Array.from(vHeadOrder(1, 3, 2)), [0, 1, 2, 3, 4, 5])
})

t.test('export of the tiny package: header, names, shapes, types, data size', async t => {
  const root = mkdtempSync(join(tmpdir(), 'splash-gguf-'))
  const dir = join(root, 'tiny')
  await synthPackage({preset: 'tiny-hybrid', out: dir, quant: 'q4'})
  for (const type of ['q4_0', 'q8_0'] as const) {
    const out = join(root, `tiny-${type}.gguf`)
    const r = await exportGguf({dir, out, type})
    t.equal(r.arch, 'qwen35')
    const buf = readFileSync(out)
    t.equal(buf.length, r.bytes)
    const p = parse(buf)
    t.equal(p.kv.get('general.architecture'), 'qwen35')
    t.equal(p.kv.get('qwen35.block_count'), 4)
    t.equal(p.kv.get('qwen35.full_attention_interval'), 4)
    t.equal(p.kv.get('qwen35.ssm.group_count'), 2)
    t.equal(p.kv.get('qwen35.ssm.time_step_rank'), 4)
    t.equal(p.kv.get('tokenizer.ggml.model'), 'gpt2')
    t.equal((p.kv.get('tokenizer.ggml.tokens') as string[]).length, 512)
    t.equal((p.kv.get('tokenizer.ggml.token_type') as number[])[482], 3)
    t.equal(p.kv.get('tokenizer.ggml.eos_token_id'), 482)
    t.ok((p.kv.get('tokenizer.ggml.merges') as string[]).length > 100)
    t.match(p.kv.get('tokenizer.chat_template') as string, /im_start/)
    const byName = new Map(p.tensors.map(x => [x.name, x]))
    t.same(byName.get('token_embd.weight')?.ne, [64, 512])
    t.equal(byName.get('token_embd.weight')?.type, type === 'q4_0' ? GgmlType.Q4_0 : GgmlType.Q8_0)
    t.same(byName.get('blk.0.ssm_conv1d.weight')?.ne, [4, 2 * 2 * 16 + 4 * 16])
    t.equal(byName.get('blk.0.ssm_conv1d.weight')?.type, GgmlType.F32)
    t.same(byName.get('blk.0.ssm_a')?.ne, [4])
    t.ok(byName.has('blk.0.ssm_dt.bias'))
    t.ok(byName.has('blk.3.attn_q_norm.weight'))
    t.same(byName.get('blk.3.attn_q.weight')?.ne, [64, 2 * 32 * 2])
    t.ok(byName.has('output.weight'))
    let end = 0
    for (const x of p.tensors) {
      t.equal(x.offset % 32, 0, `${x.name} aligned`)
      t.ok(x.offset >= end, `${x.name} after the previous tensor`)
      end = x.offset + tensorBytes(x)
    }
    t.ok(p.dataStart + end <= buf.length)
    // ssm_a is −exp(A_log): all negative.
    const a = byName.get('blk.0.ssm_a')!
    const vals = new Float32Array(buf.buffer.slice(buf.byteOffset + p.dataStart + a.offset, buf.byteOffset + p.dataStart + a.offset + 16))
    t.ok(Array.from(vals).every(v => v < 0))
  }
})

t.test('the CLI encodes on worker threads, byte for byte as on one thread', async t => {
  const root = mkdtempSync(join(tmpdir(), 'splash-gguf-'))
  const dir = join(root, 'tiny')
  // the compiled CLI has the module its workers load (else it would encode on one thread too)
  t.ok(existsSync(join(cliRoot, 'dist/src/package/export/gguf-encode.js')), 'the workers\' module is built')
  // the embedding's 512 rows are two chunks of 256, which may finish out of order on the pool
  await synthPackage({preset: 'tiny-hybrid', out: dir, quant: 'q4'})
  const here = join(root, 'here.gguf')
  const pooled = join(root, 'pooled.gguf')
  await exportGguf({dir, out: here})
  const r = await runCli(['package', 'export', '--gguf', pooled, dir])
  t.equal(r.code, 0, r.stderr)
  t.ok(readFileSync(pooled).equals(readFileSync(here)), 'identical files')
})

t.test('qwen3next: V heads stay grouped by K head; in_proj_b and in_proj_a fused per K head into ssm_ba', async t => {
  // tiny-moe and tiny-next with one seed hold the same tensors: the qwen35moe export (V heads tiled) is the reference
  const root = mkdtempSync(join(tmpdir(), 'splash-gguf-'))
  const files: Record<string, Buffer> = {}
  for (const preset of ['tiny-moe', 'tiny-next']) {
    await synthPackage({preset, out: join(root, preset), quant: 'q8', seed: 7})
    await exportGguf({dir: join(root, preset), out: join(root, `${preset}.gguf`), type: 'q8_0'})
    files[preset] = readFileSync(join(root, `${preset}.gguf`))
  }
  const moe = parse(files['tiny-moe']!)
  const next = parse(files['tiny-next']!)
  const row = (p: Parsed, buf: Buffer, name: string, i: number) => {
    const x = p.tensors.find(y => y.name === name)
    if (!x) throw new Error(`no ${name}`)
    const n = tensorBytes({ne: [x.ne[0]!], type: x.type})
    return buf.subarray(p.dataStart + x.offset + i * n, p.dataStart + x.offset + (i + 1) * n)
  }
  const r35 = (name: string, i: number) => row(moe, files['tiny-moe']!, name, i)
  const rn = (name: string, i: number) => row(next, files['tiny-next']!, name, i)
  t.equal(next.kv.get('general.architecture'), 'qwen3next')
  t.equal(next.kv.get('qwen3next.ssm.group_count'), 2)
  t.equal(next.kv.get('qwen3next.expert_count'), 4)
  t.notOk(next.kv.has('qwen3next.rope.dimension_sections'), 'plain RoPE')
  const names = new Set(next.tensors.map(x => x.name))
  t.notOk(names.has('blk.0.ssm_beta.weight') || names.has('blk.0.ssm_alpha.weight'))
  const ba = next.tensors.find(x => x.name === 'blk.0.ssm_ba.weight')!
  t.same([ba.ne, ba.type], [[64, 8], GgmlType.F32])
  const nk = 2, r = 2, dk = 16, dv = 16
  const tiled = (g: number, j: number) => j * nk + g
  let same = 0, checked = 0
  const check = (a: Buffer, b: Buffer) => ((checked += 1), (same += a.equals(b) ? 1 : 0))
  for (let i = 0; i < 2 * nk * dk; i++) check(rn('blk.0.attn_qkv.weight', i), r35('blk.0.attn_qkv.weight', i))
  for (let g = 0; g < nk; g++) {
    for (let j = 0; j < r; j++) {
      for (let d = 0; d < dv; d++) {
        check(rn('blk.0.attn_qkv.weight', 2 * nk * dk + (g * r + j) * dv + d), r35('blk.0.attn_qkv.weight', 2 * nk * dk + tiled(g, j) * dv + d))
        check(rn('blk.0.attn_gate.weight', (g * r + j) * dv + d), r35('blk.0.attn_gate.weight', tiled(g, j) * dv + d))
      }
      check(rn('blk.0.ssm_ba.weight', 2 * g * r + j), r35('blk.0.ssm_beta.weight', tiled(g, j)))
      check(rn('blk.0.ssm_ba.weight', (2 * g + 1) * r + j), r35('blk.0.ssm_alpha.weight', tiled(g, j)))
    }
  }
  for (let i = 0; i < 512; i++) check(rn('token_embd.weight', i), r35('token_embd.weight', i))
  t.equal(same, checked, `${same} of ${checked} rows where the qwen35moe export has them`)
})
