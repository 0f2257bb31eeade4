// Planner arithmetic on real model shapes, and refusal when the model does not fit.
import t from 'tap'
import {planMemory, stateSizes, gdnRollback, formatPlan, assertFits, deviceScratchBytes, MIN_CONTEXT} from '../../src/runtime/memory-plan.js'
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

function manifest(config: ModelConfig): Manifest {
  return {
    format: 1, name: 'x', family: 'qwen3_5', architecture: 'Qwen3_5ForCausalLM', config,
    tokenizer: {file: 'tokenizer.json', chat_template: 'chat_template.jinja', eos_token_ids: [1], pad_token_id: null},
    reasoning: {default: 'medium', efforts: {none: 0}}, weights: {files: ['model.safetensors'], quant: 'q4', group_size: 64},
    draft: null, vision: null, kernels: [], provenance: {source: 's', builder: 'b', kind: 'synthetic'},
    files: [{path: 'model.safetensors', size: 1, sha256: '0'.repeat(64)}],
  }
}

t.test('state sizes match the published figures (bf16 KV)', async t => {
  const s27 = stateSizes(qwen27b, null, 2)
  t.equal(s27.kvBytesPerToken, 64 * 1024, '27B: 16 layers × 2 × 4 × 256 × 2 B = 64 KiB/token')
  t.equal(s27.recurrentBytes, 48 * (3 * MiB + 3 * 10240 * 2), '27B: 48 × (3 MiB state + conv)')
  const s35 = stateSizes(qwen35bA3b, null, 2)
  t.equal(s35.kvBytesPerToken, 20 * 1024, '35B-A3B: 10 × 2 × 2 × 256 × 2 B = 20 KiB/token')
  t.equal(s35.recurrentBytes, 30 * (2 * MiB + 3 * 8192 * 2), '35B-A3B: 30 × (2 MiB + conv)')
})

t.test('GDN rollback: replay from 1 MiB of recurrent state per linear layer, else per-position states', async t => {
  t.equal(gdnRollback(qwen27b, {}), 'replay', '27B: 48 × 128 × 128 × 4 B = 3 MiB')
  const small = {...qwen27b, linear_num_value_heads: 16}
  t.equal(gdnRollback(small, {}), 'replay', '0.8B shape: 16 × 128 × 128 × 4 B = 1 MiB')
  const tiny = {...qwen27b, linear_num_value_heads: 6, linear_key_head_dim: 64, linear_value_head_dim: 64}
  t.equal(gdnRollback(tiny, {}), 'states', 'default package shape: 96 KiB')
  t.equal(gdnRollback(qwen27b, {SPLASH_GDN_ROLLBACK: 'states'}), 'states', 'the override')
  t.equal(gdnRollback(tiny, {SPLASH_GDN_ROLLBACK: 'replay'}), 'replay', 'the override')
  // what one sequence keeps for a verify step of 16 (fp32 conv state, as on the CPU)
  const draft = {block_size: 16} as DraftConfig
  const s = stateSizes(qwen27b, draft, 4, 'states')
  t.equal(s.speculativeBytes, 17 * s.recurrentBytes, 'states: the state after each of 16 positions and before them')
  t.equal(s.draftRowsBytes, 15 * qwen27b.vocab_size * 4, 'a sampled draft pass keeps 15 rows of the vocabulary')
  t.equal(stateSizes(qwen27b, null, 4).draftRowsBytes, 0, 'none without a draft')
  const r = stateSizes(qwen27b, draft, 4, 'replay')
  t.equal(r.speculativeBytes, r.recurrentBytes + 16 * 48 * (10240 + 2 * 48) * 4, 'replay: the start state and 16 tokens of inputs')
  t.ok(s.speculativeBytes > 8 * r.speculativeBytes, `27B: ${(s.speculativeBytes / MiB).toFixed(0)} vs ${(r.speculativeBytes / MiB).toFixed(0)} MiB`)
  t.equal(stateSizes(qwen27b, null, 4).speculativeBytes, 0, 'no draft, no verify steps')
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
  // the 27B's 5-layer draft (8 KV heads of 128), as DFlash 2 ships it: 4 sliding layers (window 2048) and 1 full
  const base = {
    block_size: 16, mask_token_id: 248077, target_layer_ids: [1, 16, 31, 46, 61], num_hidden_layers: 5, hidden_size: 5120,
    intermediate_size: 17408, num_attention_heads: 32, num_key_value_heads: 8, head_dim: 128, rope_theta: 1e7,
    rms_norm_eps: 1e-6, sliding_window: null, conv_kernel_size: null, conv_group_size: null, selector_rank: null, selector_top_k: null,
  } satisfies DraftConfig
  const row = 2 * 8 * 128 * 4 // K and V of one position, one layer, fp32
  const target = stateSizes(qwen27b, null, 4).kvBytesPerToken
  const full = stateSizes(qwen27b, base, 4)
  t.equal(full.kvBytesPerToken, target + 5 * row, 'DFlash: every draft layer per token')
  t.equal(full.draftWindowBytes, 0)
  const mixed: DraftConfig = {...base, sliding_window: 2048, layer_types: ['sliding_attention', 'sliding_attention', 'sliding_attention', 'sliding_attention', 'full_attention']}
  const s = stateSizes(qwen27b, mixed, 4)
  t.equal(s.kvBytesPerToken, target + row, 'DFlash 2: the full layer only')
  t.equal(s.draftWindowBytes, 4 * row * 2 * (2048 + 16), 'each sliding layer: 2 × (window + block) rows')
  t.equal(stateSizes(qwen27b, {...mixed, layer_types: undefined}, 4).draftWindowBytes, 0, 'no layer_types: every layer full')
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
