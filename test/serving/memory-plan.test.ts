// Planner arithmetic on real model shapes, and refusal when the model does not fit.
import t from 'tap'
import {planMemory, stateSizes, formatPlan, assertFits, assertContext, plannedBytes, deviceScratchBytes, MIN_CONTEXT} from '../../src/serving/memory-plan.js'
import {native} from '../../src/native/native.js'
import type {DraftConfig, Manifest, ModelConfig} from '../../src/package/manifest.js'

const GiB = 1024 ** 3
const MiB = 1024 ** 2

function layerTypes(n: number): Array<'linear_attention' | 'full_attention'> {
  return Array.from({length: n}, (_, i) => ((i + 1) % 4 === 0 ? 'full_attention' : 'linear_attention'))
}

const qwen27b: ModelConfig = {
  hidden_size: 5120, num_hidden_layers: 64, vocab_size: 248320, layer_types: layerTypes(64), rms_norm_eps: 1e-6,
  num_attention_heads: 24, num_key_value_heads: 4, head_dim: 256, attn_output_gate: true, rope_theta: 1e7,
  partial_rotary_factor: 0.25, mrope_section: [11, 11, 10], mrope_interleaved: true, linear_num_key_heads: 16,
  linear_num_value_heads: 48, linear_key_head_dim: 128, linear_value_head_dim: 128, linear_conv_kernel_dim: 4,
  intermediate_size: 17408, tie_word_embeddings: false, max_position_embeddings: 262144, qk_norm: 'zero_centred',
}

const qwen35bA3b: ModelConfig = {
  ...qwen27b, hidden_size: 2048, num_hidden_layers: 40, layer_types: layerTypes(40), num_attention_heads: 16,
  num_key_value_heads: 2, linear_num_value_heads: 32, intermediate_size: 0, num_experts: 256, num_experts_per_tok: 8,
  moe_intermediate_size: 512, shared_expert_intermediate_size: 512,
}

// the 27B's 5-layer draft (8 KV heads of 128), as DFlash ships it
const draft27: DraftConfig = {
  block_size: 16, mask_token_id: 248077, target_layer_ids: [1, 16, 31, 46, 61], num_hidden_layers: 5, hidden_size: 5120,
  intermediate_size: 17408, num_attention_heads: 32, num_key_value_heads: 8, head_dim: 128, rope_theta: 1e7,
  rms_norm_eps: 1e-6, sliding_window: null, conv_kernel_size: null, conv_group_size: null, selector_rank: null, selector_top_k: null,
}

function manifest(config: ModelConfig, draft: DraftConfig | null = null): Manifest {
  return {
    format: 1, name: 'x', family: 'qwen3_5', architecture: 'Qwen3_5ForCausalLM', config,
    tokenizer: {file: 'tokenizer.json', chat_template: 'chat_template.jinja', eos_token_ids: [1], pad_token_id: null},
    reasoning: {default: 'medium', efforts: {none: 0}}, weights: {files: ['model.safetensors'], quant: 'q4', group_size: 64},
    draft: draft ? {config: draft, files: ['draft.safetensors']} : null, vision: null, kernels: [], provenance: {source: 's', builder: 'b', kind: 'synthetic'},
    files: [{path: 'model.safetensors', size: 1, sha256: '0'.repeat(64)}],
  }
}

t.test('state sizes match the published figures (bf16 KV)', async t => {
  const s27 = stateSizes(manifest(qwen27b), 2)
  t.equal(s27.kvBytesPerToken, 64 * 1024, '27B: 16 layers × 2 × 4 × 256 × 2 B = 64 KiB/token')
  t.equal(s27.recurrentBytes, 48 * (3 * MiB + 3 * 10240 * 2), '27B: 48 × (3 MiB state + conv)')
  const s35 = stateSizes(manifest(qwen35bA3b), 2)
  t.equal(s35.kvBytesPerToken, 20 * 1024, '35B-A3B: 10 × 2 × 2 × 256 × 2 B = 20 KiB/token')
  t.equal(s35.recurrentBytes, 30 * (2 * MiB + 3 * 8192 * 2), '35B-A3B: 30 × (2 MiB + conv)')
})

t.test('GDN rollback: replay from 1 MiB of recurrent state per linear layer, else per-position states', async t => {
  t.equal(process.env.SPLASH_GDN_ROLLBACK, undefined)
  const rule = (c: ModelConfig) => native.stateSizes(manifest(c)).gdnRollback
  t.equal(rule(qwen27b), 'replay', '27B: 48 × 128 × 128 × 4 B = 3 MiB')
  const small = {...qwen27b, linear_num_value_heads: 16}
  t.equal(rule(small), 'replay', '0.8B shape: 16 × 128 × 128 × 4 B = 1 MiB')
  const tiny = {...qwen27b, linear_num_value_heads: 6, linear_num_key_heads: 6, linear_key_head_dim: 64, linear_value_head_dim: 64}
  t.equal(rule(tiny), 'states', 'default package shape: 96 KiB')
  t.equal(native.stateSizes(manifest(qwen27b), {rollback: 'states'}).gdnRollback, 'states', 'the override')
  t.equal(native.stateSizes(manifest(tiny), {rollback: 'replay'}).gdnRollback, 'replay', 'the override')
  t.throws(() => native.stateSizes(manifest(tiny), {rollback: 'sometimes' as 'replay'}), {code: 'invalid_argument'})
  // what one sequence keeps for a verify step of 16 (fp32 conv state, as on the CPU)
  const s = stateSizes(manifest(qwen27b, draft27), 4, 'states')
  t.equal(s.speculativeBytes, 17 * s.recurrentBytes, 'states: the state after each of 16 positions and before them')
  t.equal(s.draftRowsBytes, 15 * qwen27b.vocab_size * 4, 'a sampled draft pass keeps 15 rows of the vocabulary')
  t.equal(stateSizes(manifest(qwen27b), 4).draftRowsBytes, 0, 'none without a draft')
  const r = stateSizes(manifest(qwen27b, draft27), 4, 'replay')
  t.equal(r.speculativeBytes, r.recurrentBytes + 16 * 48 * (10240 + 2 * 48) * 4, 'replay: the start state and 16 tokens of inputs')
  t.ok(s.speculativeBytes > 8 * r.speculativeBytes, `27B: ${(s.speculativeBytes / MiB).toFixed(0)} vs ${(r.speculativeBytes / MiB).toFixed(0)} MiB`)
  t.equal(stateSizes(manifest(qwen27b), 4).speculativeBytes, 0, 'no draft, no verify steps')
})

t.test('27B q4 on a 24 GiB machine: context shrinks to what fits', async t => {
  const p = planMemory({manifest: manifest(qwen27b), weightBytes: 14.5 * GiB, draftBytes: 0.9 * GiB, available: 22 * GiB, kvElementBytes: 2})
  t.ok(p.fits)
  t.ok(p.contextLimit < 262144 && p.contextLimit >= MIN_CONTEXT, `context ${p.contextLimit}`)
  t.equal(p.contextLimit % 256, 0)
  t.ok(p.batchLimit >= 1)
  const used = p.weights + p.draft + p.scratch + p.batchLimit * (p.state.recurrentBytes + p.state.speculativeBytes) + p.kvBytes
  t.ok(used <= p.budget + 1, 'the plan never exceeds the budget')
  t.ok(p.kvCapacityTokens >= p.contextLimit, 'the KV pool holds at least one full context')
  t.match(formatPlan(p).join('\n'), /context limit/)
})

t.test('--max-context and --max-memory cap the plan', async t => {
  const p = planMemory({manifest: manifest(qwen35bA3b), weightBytes: 18 * GiB, draftBytes: 0.5 * GiB, available: 100 * GiB, maxContext: 100 * 1024, kvElementBytes: 2})
  t.equal(p.contextLimit, 100 * 1024)
  t.equal(p.batchLimit, 16)
  const q = planMemory({manifest: manifest(qwen35bA3b), weightBytes: 18 * GiB, draftBytes: 0.5 * GiB, available: 100 * GiB, maxMemory: 20 * GiB, kvElementBytes: 2})
  t.equal(q.budget, 20 * GiB)
  t.ok(q.contextLimit < 262144)
})

// The default package's shape with a 128K window (8 layers, 2 of them full attention, 2 KV heads of 64, a 2-layer
// DFlash draft): 4 KiB of KV per token in fp32.
const small128k: ModelConfig = {
  ...qwen27b, hidden_size: 384, num_hidden_layers: 8, vocab_size: 16384, layer_types: layerTypes(8), num_attention_heads: 6,
  num_key_value_heads: 2, head_dim: 64, linear_num_key_heads: 6, linear_num_value_heads: 6, linear_key_head_dim: 64,
  linear_value_head_dim: 64, intermediate_size: 1024, tie_word_embeddings: true, max_position_embeddings: 131072,
}
const smallDraft: DraftConfig = {
  block_size: 16, mask_token_id: 16383, target_layer_ids: [1, 4, 6], num_hidden_layers: 2, hidden_size: 384, intermediate_size: 1024,
  num_attention_heads: 6, num_key_value_heads: 2, head_dim: 64, rope_theta: 1e6, rms_norm_eps: 1e-6, sliding_window: null,
  conv_kernel_size: null, conv_group_size: null, selector_rank: null, selector_top_k: null,
}

t.test('a small model with a 128K window on a 24 GiB machine: the KV reserve is what the batch can hold, not all free memory', async t => {
  const m = {...manifest(small128k), draft: {config: smallDraft, files: ['draft.safetensors']}}
  const available = 22.3 * GiB
  const p = planMemory({manifest: m, weightBytes: 15 * MiB, draftBytes: 3 * MiB, available})
  t.ok(p.fits)
  t.equal(p.state.kvBytesPerToken, 4096, '(2 target + 2 draft layers) × 2 × 2 heads × 64 × 4 B')
  t.equal(p.contextLimit, 131072, 'the package window, served whole')
  t.equal(p.batchLimit, 16)
  t.equal(p.kvBytes, 16 * 131072 * 4096, '16 requests at the full window: 8 GiB')
  t.equal(p.cacheBytes, p.kvBytes / 2)
  t.ok(plannedBytes(p) < available / 2, `${(plannedBytes(p) / GiB).toFixed(2)} GiB planned of ${available / GiB} GiB`)
  // the same package with its 4K window: 256 MiB, where the plan used to take every free byte (~22 GiB)
  const short = planMemory({manifest: {...m, config: {...small128k, max_position_embeddings: 4096}}, weightBytes: 15 * MiB, draftBytes: 3 * MiB, available})
  t.equal(short.kvBytes, 16 * 4096 * 4096)
  t.match(formatPlan(short).join('\n'), /KV cache +256 MiB \(65,536 tokens; 16\.0 MiB per full context\)/)
  // a window whose full batch would take most of the machine stops at half of what it has available
  const long = planMemory({manifest: {...m, config: {...small128k, max_position_embeddings: 262144}}, weightBytes: 15 * MiB, draftBytes: 3 * MiB, available})
  t.equal(long.kvBytes, Math.floor(available / 2))
  t.ok(long.kvBytes >= long.contextLimit * 4096, 'still at least one full context')
})

t.test('--max-context beyond the package, or beyond what fits, is refused with the real limit', async t => {
  const m = manifest({...qwen27b, max_position_embeddings: 131072})
  const p = planMemory({manifest: m, weightBytes: 14.5 * GiB, draftBytes: 0.9 * GiB, available: 130 * GiB, maxContext: 200 * 1024})
  t.throws(() => assertContext(p, m, 200 * 1024), /^--max-context 204800 is more than x supports: its window is 131,072 tokens; ask for 131072 or less, or serve a package with a longer window$/)
  const asked = planMemory({manifest: m, weightBytes: 14.5 * GiB, draftBytes: 0.9 * GiB, available: 130 * GiB, maxContext: 1000})
  t.equal(asked.contextLimit, 1000, 'a window that fits is served exactly as asked')
  t.doesNotThrow(() => assertContext(asked, m, 1000))
  const tight = planMemory({manifest: m, weightBytes: 14.5 * GiB, draftBytes: 0.9 * GiB, available: 22 * GiB, maxContext: 131072, kvElementBytes: 2})
  t.ok(tight.fits && tight.contextLimit < 131072, `memory allows ${tight.contextLimit}`)
  t.throws(() => assertContext(tight, m, 131072), new RegExp(`^--max-context 131072 does not fit in [\\d.]+ GiB of host memory: at most ${tight.contextLimit} tokens do; ask for that or less, or give more memory with --max-memory$`))
  t.doesNotThrow(() => assertContext(tight, m, undefined), 'without --max-context the plan takes what fits')
})

t.test('refuses when it does not fit, with the budget line by line', async t => {
  const p = planMemory({manifest: manifest(qwen27b), weightBytes: 14.5 * GiB, draftBytes: 0.9 * GiB, available: 8 * GiB})
  t.notOk(p.fits)
  t.equal(p.contextLimit, 0)
  t.throws(() => assertFits(p), /the model does not fit: it needs at least [\d.]+ GiB and 8.00 GiB of host memory is available \(the memory plan above shows where it goes\)$/)
})

t.test('on a device: the budget is its free memory, the backend scratch is planned, --max-memory caps it', async t => {
  const device = {kind: 'device', backend: 'cuda', total: 139 * GiB} as const
  const host = planMemory({manifest: manifest(qwen27b), weightBytes: 14.5 * GiB, draftBytes: 0.9 * GiB, available: 130 * GiB})
  const p = planMemory({manifest: manifest(qwen27b), weightBytes: 14.5 * GiB, draftBytes: 0.9 * GiB, available: 130 * GiB, memory: device})
  t.ok(p.fits)
  t.equal(p.budget, 130 * GiB)
  // the LM head as bf16 (248320 × 5120 × 2 B), grown by half, plus the runtime's workspaces
  t.equal(deviceScratchBytes(qwen27b), Math.ceil(248320 * 5120 * 2 * 1.5) + 256 * MiB)
  t.equal(p.scratch, host.scratch + deviceScratchBytes(qwen27b))
  const used = p.weights + p.draft + p.scratch + p.batchLimit * (p.state.recurrentBytes + p.state.speculativeBytes) + p.kvBytes
  t.ok(used <= p.budget + 1, 'the plan never exceeds the device budget')
  t.match(formatPlan(p).join('\n'), /memory +cuda device memory \(130 GiB free of 139 GiB\)/)
  const capped = planMemory({manifest: manifest(qwen27b), weightBytes: 14.5 * GiB, draftBytes: 0.9 * GiB, available: 130 * GiB, maxMemory: 24 * GiB, memory: device})
  t.equal(capped.budget, 24 * GiB)
  t.ok(capped.fits && capped.kvBytes < p.kvBytes)
  const small = planMemory({manifest: manifest(qwen27b), weightBytes: 14.5 * GiB, draftBytes: 0.9 * GiB, available: 130 * GiB, maxMemory: 16 * GiB, memory: device})
  t.notOk(small.fits, 'weights + draft + device scratch exceed 16 GiB')
  t.throws(() => assertFits(small), /and 16\.0 GiB of cuda device memory \(130 GiB free of 139 GiB\) is available/)
})

t.test('draft KV: full-attention draft layers per token, sliding ones a fixed ring per sequence', async t => {
  // the 27B's draft, and as DFlash 2 ships it: 4 sliding layers (window 2048) and 1 full
  const base = draft27
  const row = 2 * 8 * 128 * 4 // K and V of one position, one layer, fp32
  const target = stateSizes(manifest(qwen27b), 4).kvBytesPerToken
  const full = stateSizes(manifest(qwen27b, base), 4)
  t.equal(full.kvBytesPerToken, target + 5 * row, 'DFlash: every draft layer per token')
  t.equal(full.draftWindowBytes, 0)
  const mixed: DraftConfig = {...base, sliding_window: 2048, layer_types: ['sliding_attention', 'sliding_attention', 'sliding_attention', 'sliding_attention', 'full_attention']}
  const s = stateSizes(manifest(qwen27b, mixed), 4)
  t.equal(s.kvBytesPerToken, target + row, 'DFlash 2: the full layer only')
  t.equal(s.draftWindowBytes, 4 * row * 2 * (2048 + 16), 'each sliding layer: 2 × (window + block) rows')
  t.equal(stateSizes(manifest(qwen27b, {...mixed, layer_types: undefined}), 4).draftWindowBytes, 0, 'no layer_types: every layer full')
  // per sequence at 32K: 4 × 32 KiB × 32,784 rows before, 4 × 32 KiB × 4,128 rows now
  t.equal(4 * row * (32768 + 16) - s.draftWindowBytes, 4 * row * (32768 + 16 - 2 * 2064))
  const plan = (draft: DraftConfig) =>
    planMemory({manifest: {...manifest(qwen27b), draft: {config: draft, files: ['draft.safetensors']}}, weightBytes: 14.5 * GiB, draftBytes: 0.9 * GiB, available: 40 * GiB})
  const before = plan(base)
  const after = plan(mixed)
  t.ok(after.fits && before.fits)
  t.ok(after.contextLimit > before.contextLimit, `a longer context fits: ${before.contextLimit} → ${after.contextLimit}`)
  const used = after.weights + after.draft + after.scratch + after.batchLimit * (after.state.recurrentBytes + after.state.speculativeBytes + after.state.draftWindowBytes + after.state.draftRowsBytes) + after.kvBytes
  t.ok(used <= after.budget + 1, 'the rings are planned per sequence')
  t.match(formatPlan(after).join('\n'), /state per request/)
})
