// Will this package fit? Weights + draft + the smallest useful state (one sequence of MIN_CONTEXT tokens: attention
// KV, GDN recurrent and conv state, the draft's KV) + scratch, against the memory available or --max-memory. The
// full planner (context and batch limits) is src/serving/memory-plan.ts; this is the go / no-go check before loading.
import {formatBytes} from '../config/units.js'
import type {Manifest} from './manifest.js'

export const MIN_CONTEXT = 4096

export interface MemoryCheck {
  fits: boolean
  needed: number
  budget: number
  lines: string[]
}

function filesSize(m: Manifest, paths: readonly string[]): number {
  return paths.reduce((n, p) => n + (m.files.find(f => f.path === p)?.size ?? 0), 0)
}

/** Bytes of state for one sequence of `tokens` tokens (bf16 KV, fp32 GDN state, bf16 conv state). */
export function stateBytes(m: Manifest, tokens = MIN_CONTEXT): {kv: number; gdn: number; draftKv: number} {
  const c = m.config
  const attn = c.layer_types.filter(t => t === 'full_attention').length
  const gdnLayers = c.layer_types.length - attn
  const kv = attn * 2 * c.num_key_value_heads * c.head_dim * 2 * tokens
  let gdn = 0
  if (gdnLayers > 0) {
    const nv = c.linear_num_value_heads ?? 0
    const dk = c.linear_key_head_dim ?? 0
    const dv = c.linear_value_head_dim ?? 0
    const channels = 2 * (c.linear_num_key_heads ?? 0) * dk + nv * dv
    gdn = gdnLayers * (nv * dk * dv * 4 + ((c.linear_conv_kernel_dim ?? 4) - 1) * channels * 2)
  }
  const d = m.draft?.config
  const draftKv = d ? d.num_hidden_layers * 2 * d.num_key_value_heads * d.head_dim * 2 * tokens : 0
  return {kv, gdn, draftKv}
}

export function checkMemory(m: Manifest, available: number, maxMemory?: number): MemoryCheck {
  const weights = filesSize(m, m.weights.files)
  const draft = filesSize(m, m.draft?.files ?? [])
  const s = stateBytes(m)
  const block = m.draft?.config.block_size ?? 1
  // logits for one verify block in fp32 plus activations of the widest layer, doubled for safety
  const scratch = 2 * (block * m.config.vocab_size * 4 + block * 16 * m.config.hidden_size * 4) + 64 * 1024 * 1024
  const needed = weights + draft + s.kv + s.gdn + s.draftKv + scratch
  const budget = maxMemory !== undefined ? Math.min(maxMemory, available) : available
  const row = (label: string, bytes: number) => `  ${label.padEnd(40)} ${formatBytes(bytes).padStart(10)}`
  const lines = [
    `memory for ${m.name}:`,
    row(`weights (${m.weights.quant})`, weights),
    row('draft', draft),
    row(`attention KV (1 sequence, ${MIN_CONTEXT} tokens)`, s.kv),
    row('GDN recurrent + conv state (1 sequence)', s.gdn),
    row(`draft KV (${MIN_CONTEXT} tokens)`, s.draftKv),
    row('scratch', scratch),
    row('total needed', needed),
    row(maxMemory !== undefined && maxMemory < available ? 'budget (--max-memory)' : 'available', budget),
  ]
  const fits = needed <= budget
  if (!fits) lines.push(`  does not fit: ${formatBytes(needed - budget)} short`)
  return {fits, needed, budget, lines}
}
