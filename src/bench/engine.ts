// `splash bench engine`: the native engine timed directly (no HTTP). Decode and prefill tokens/s of a package, the
// fraction of memory bandwidth a decode step reaches (weight bytes read per token / step time, against memcpy GB/s
// measured in the same process by native.benchMatmul) and prefill FLOP/s against a peak measured in the same run for
// the q4 matmul kernel (a [nt=64] × [1024, 1024] q4 matmul, one thread, times the thread count: an upper bound).
import {cpus} from 'node:os'
import {modelLayout} from '../package/layout.js'
import {readManifest, type ModelConfig, type Quant} from '../package/manifest.js'
import {quantize} from '../package/builder/quantize.js'
import {storedBytes} from '../package/builder/weights.js'
import {native} from '../native/native.js'
import {progress, stats, type Log, type Stats} from './common.js'

export interface EngineBenchOptions {
  dir: string
  threads?: number
  /** Tokens of the timed prefill step. */
  prefillTokens?: number
  /** Timed decode steps. */
  decodeSteps?: number
  /** Repeats of the prefill measurement. */
  runs?: number
  log?: Log
}

export interface ModelCost {
  /** Bytes of weights one decode token reads (MoE: routed experts scaled by top-k / experts; embedding: one row). */
  decodeBytesPerToken: number
  /** Matmul FLOPs per token (2 · active weight elements, lm_head excluded: prefill computes it for the last token). */
  matmulFlopsPerToken: number
  lmHeadFlops: number
}

/** Weight bytes and FLOPs per token from the package's layout (exact for the Splash tensor set). */
export function modelCost(c: ModelConfig, quant: Quant): ModelCost {
  let bytes = 0
  let flops = 0
  let lmHeadFlops = 0
  const E = c.num_experts ?? 0
  const K = c.num_experts_per_tok ?? 0
  for (const e of modelLayout(c)) {
    const b = storedBytes(e, quant)
    const elems = e.shape.reduce((a, x) => a * x, 1)
    if (e.name === 'embed_tokens') {
      bytes += b / e.shape[0] // one row
      if (c.tie_word_embeddings) {
        bytes += b
        lmHeadFlops = 2 * elems
      }
      continue
    }
    if (e.name === 'lm_head') {
      bytes += b
      lmHeadFlops = 2 * elems
      continue
    }
    const routed = E > 0 && e.name.includes('.mlp.experts.')
    const share = routed ? K / E : 1
    bytes += b * share
    if (e.kind === 'linear') flops += 2 * elems * share
  }
  return {decodeBytesPerToken: bytes, matmulFlopsPerToken: flops, lmHeadFlops}
}

/** Attention + GDN recurrence FLOPs of a prefill of P tokens (causal: average context P/2). */
function mixerFlops(c: ModelConfig, P: number): number {
  let f = 0
  for (const t of c.layer_types) {
    if (t === 'full_attention') f += 2 * 2 * c.num_attention_heads * c.head_dim * (P * (P + 1)) / 2
    else f += P * 6 * (c.linear_num_value_heads ?? 0) * (c.linear_key_head_dim ?? 0) * (c.linear_value_head_dim ?? 0)
  }
  return f
}

export interface EngineBenchResult {
  package: {dir: string; name: string; family: string; quant: string; layers: number; hidden: number; weightBytes: number; provenance: string}
  threads: number
  isa: string
  activations: string
  memcpyGBps: number
  matvecGBps: number
  decodeBytesPerToken: number
  decode: {steps: number; secondsPerStep: number[]; tokensPerSecond: Stats; bandwidthGBps: number; bandwidthFraction: number; roundFractions: number[]}
  prefill: {tokens: number; seconds: number[]; tokensPerSecond: Stats; flops: number; flopsPerSecond: number; peakFlopsPerSecond: number; peakFraction: number}
  peak: {what: string; singleThreadFlopsPerSecond: number}
}

function rngTokens(n: number, vocab: number, seed: number): Int32Array {
  const out = new Int32Array(n)
  let s = seed >>> 0 || 1
  const top = Math.min(vocab, 200) // ordinary (byte / merge) ids, never specials
  for (let i = 0; i < n; i++) {
    s ^= s << 13
    s ^= s >>> 17
    s ^= s << 5
    out[i] = (s >>> 0) % top
  }
  return out
}

/** Single-thread q4 matmul FLOP/s at prefill-like shapes, through the kernel the engine uses. */
function measurePeak(activations: string): number {
  const rows = 1024
  const cols = 1024
  const nt = 64
  const w = new Float32Array(rows * cols)
  for (let i = 0; i < w.length; i++) w[i] = Math.sin(i * 12.9898) * 0.05
  const q = quantize(w, rows, cols, 4)
  const x = new Float32Array(nt * cols)
  for (let i = 0; i < x.length; i++) x[i] = Math.cos(i * 78.233)
  const opts = {dtype: 'q4' as const, rows, cols, weight: q.weight, scales: q.scales, biases: q.biases, x, nt, int8: activations !== 'f32', int8x2: activations === 'int8x2'}
  native.runMatmul(opts) // warm
  const times: number[] = []
  for (let i = 0; i < 5; i++) {
    const t0 = process.hrtime.bigint()
    native.runMatmul(opts)
    times.push(Number(process.hrtime.bigint() - t0) / 1e9)
  }
  return (2 * rows * cols * nt) / Math.min(...times)
}

export async function engineBench(o: EngineBenchOptions): Promise<EngineBenchResult> {
  const log = o.log ?? progress
  const m = await readManifest(o.dir)
  const threads = o.threads ?? cpus().length
  const P = o.prefillTokens ?? 256
  const steps = o.decodeSteps ?? 16
  const runs = o.runs ?? 3
  log(`engine bench: ${m.name} (${m.config.num_hidden_layers} layers, ${m.weights.quant}), ${threads} threads`)
  const h = await native.openModel(o.dir, {threads})
  try {
    const info = native.modelInfo(h)
    const cost = modelCost(m.config, m.weights.quant)
    // 16384 × 8192 q4 = 64 MiB of weights: far beyond any cache, so memcpy and the matvec both run from DRAM.
    // The copy rate of a shared machine moves with its load, so the decode steps run in rounds, each right after a
    // copy measurement, and the fraction of bandwidth is the median of the rounds' own ratios.
    log('bandwidth: memcpy vs a 16384 × 8192 q4 matvec (64 MiB), measured before each round of decode steps')
    const seq = native.createSequence(h, {maxLength: Math.max(P, 64) + steps + 16})
    const prompt = rngTokens(16, info.vocabSize, 1)
    await native.step(h, [{seq, tokens: prompt, logits: 'last'}])
    const one = rngTokens(steps + 2, info.vocabSize, 2)
    for (let i = 0; i < 2; i++) await native.step(h, [{seq, tokens: one.subarray(i, i + 1), logits: 'last'}]) // warm-up
    const rounds = Math.min(4, steps)
    const stepTimes: number[] = []
    const memcpy: number[] = []
    const matvec: number[] = []
    const ratios: number[] = []
    for (let r = 0, next = 2; r < rounds; r++) {
      const bw = await native.benchMatmul({rows: 16384, cols: 8192, dtype: 'q4', threads, iters: 4, activations: info.matmulActivations})
      memcpy.push(bw.memcpyGBps)
      matvec.push(bw.matvecGBps)
      const round: number[] = []
      const end = 2 + Math.round((steps * (r + 1)) / rounds)
      for (; next < end; next++) {
        const t0 = process.hrtime.bigint()
        await native.step(h, [{seq, tokens: one.subarray(next, next + 1), logits: 'last'}])
        round.push(Number(process.hrtime.bigint() - t0) / 1e9)
      }
      stepTimes.push(...round)
      const gbps = cost.decodeBytesPerToken / stats(round).median / 1e9
      ratios.push(gbps / bw.memcpyGBps)
      log(`  round ${r + 1}: memcpy ${bw.memcpyGBps.toFixed(2)} GB/s, q4 matvec ${bw.matvecGBps.toFixed(2)} GB/s, decode ${gbps.toFixed(2)} GB/s = ${(100 * gbps / bw.memcpyGBps).toFixed(0)}%`)
    }
    native.freeSequence(h, seq)
    const bw = {memcpyGBps: stats(memcpy).median, matvecGBps: stats(matvec).median}
    const decodeTps = stats(stepTimes.map(t => 1 / t))
    const stepMedian = 1 / decodeTps.median
    const bandwidthGBps = cost.decodeBytesPerToken / stepMedian / 1e9
    const bandwidthFraction = stats(ratios).median
    log(`  decode ${decodeTps.median.toFixed(2)} tok/s, ${(cost.decodeBytesPerToken / 1e6).toFixed(1)} MB/token → ${bandwidthGBps.toFixed(2)} GB/s; median round ${(100 * bandwidthFraction).toFixed(0)}% of memcpy`)

    // Prefill: P tokens in one step, fresh sequence each run.
    const prefillTimes: number[] = []
    const long = rngTokens(P, info.vocabSize, 3)
    for (let r = 0; r < runs; r++) {
      const s = native.createSequence(h, {maxLength: P + 8})
      const t0 = process.hrtime.bigint()
      await native.step(h, [{seq: s, tokens: long, logits: 'last'}])
      prefillTimes.push(Number(process.hrtime.bigint() - t0) / 1e9)
      native.freeSequence(h, s)
    }
    const prefillTps = stats(prefillTimes.map(t => P / t))
    const flops = cost.matmulFlopsPerToken * P + cost.lmHeadFlops + mixerFlops(m.config, P)
    const prefillSeconds = P / prefillTps.median
    const flopsPerSecond = flops / prefillSeconds
    const single = measurePeak(info.matmulActivations)
    const peak = single * threads
    log(`  prefill ${prefillTps.median.toFixed(1)} tok/s, ${(flopsPerSecond / 1e9).toFixed(1)} GFLOP/s vs peak ${(peak / 1e9).toFixed(1)} GFLOP/s`)
    return {
      package: {
        dir: o.dir, name: m.name, family: m.family, quant: m.weights.quant, layers: m.config.num_hidden_layers,
        hidden: m.config.hidden_size, weightBytes: info.weightBytes, provenance: m.provenance.source,
      },
      threads,
      isa: info.isa,
      activations: info.matmulActivations,
      memcpyGBps: bw.memcpyGBps,
      matvecGBps: bw.matvecGBps,
      decodeBytesPerToken: cost.decodeBytesPerToken,
      decode: {steps, secondsPerStep: stepTimes, tokensPerSecond: decodeTps, bandwidthGBps, bandwidthFraction, roundFractions: ratios},
      prefill: {tokens: P, seconds: prefillTimes, tokensPerSecond: prefillTps, flops, flopsPerSecond, peakFlopsPerSecond: peak, peakFraction: flopsPerSecond / peak},
      peak: {what: `q4 matmul [64 × 1024] × [1024 × 1024]ᵀ, ${info.matmulActivations} activations, 1 thread × ${threads}`, singleThreadFlopsPerSecond: single},
    }
  } finally {
    native.closeModel(h)
  }
}

export function engineTable(results: EngineBenchResult[]): string {
  const rows = [
    '| package | threads | decode tok/s | MB/token | decode GB/s | memcpy GB/s | % of bandwidth | prefill tok/s | prefill GFLOP/s | peak GFLOP/s | % of peak |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ]
  for (const r of results) {
    rows.push(
      `| ${r.package.name} | ${r.threads} | ${r.decode.tokensPerSecond.median.toFixed(2)} (${r.decode.tokensPerSecond.min.toFixed(2)}–${r.decode.tokensPerSecond.max.toFixed(2)}) | ` +
        `${(r.decodeBytesPerToken / 1e6).toFixed(1)} | ${r.decode.bandwidthGBps.toFixed(2)} | ${r.memcpyGBps.toFixed(2)} | ${(100 * r.decode.bandwidthFraction).toFixed(0)}% | ` +
        `${r.prefill.tokensPerSecond.median.toFixed(1)} (${r.prefill.tokensPerSecond.min.toFixed(1)}–${r.prefill.tokensPerSecond.max.toFixed(1)}) | ` +
        `${(r.prefill.flopsPerSecond / 1e9).toFixed(1)} | ${(r.prefill.peakFlopsPerSecond / 1e9).toFixed(1)} | ${(100 * r.prefill.peakFraction).toFixed(0)}% |`,
    )
  }
  return rows.join('\n')
}
