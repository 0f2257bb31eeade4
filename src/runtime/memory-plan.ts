// The memory plan: from the memory the backend offers (or --max-memory), what the model needs —
// weights, draft, per-request state, KV per token, scratch — and so the context limit, the batch
// limit and the KV capacity. Sizes come from the model config through one nbytes function each.
import type {Manifest, ModelConfig, DraftConfig} from '../package/manifest.js'
import {formatBytes} from '../config/units.js'
import {SplashError} from '../errors.js'

export interface StateSizes {
  /** Recurrent (GDN) state plus conv state of one sequence, all linear layers. */
  recurrentBytes: number
  /** Attention KV bytes per token, all full-attention layers (target and draft). */
  kvBytesPerToken: number
  /**
   * The draft's sliding-window layers, per sequence: each keeps a ring of window + block positions, stored twice
   * (core-native/model/draft_kv.cpp), whatever the context length; at most this (a short sequence keeps fewer rows).
   */
  draftWindowBytes: number
  /** What a verify step keeps per sequence for the GDN rollback (see gdnRollback); 0 without a draft. */
  speculativeBytes: number
  /**
   * A sampled draft pass's distributions, kept per sequence for the verify pass (block − 1 rows of the vocabulary in
   * fp32; on a GPU in device memory: core-native/model/draft.cpp); 0 without a draft.
   */
  draftRowsBytes: number
}

export interface PlanInput {
  manifest: Manifest
  /** Bytes of every weights file and of the draft files. */
  weightBytes: number
  draftBytes: number
  /** Memory the backend can give (bytes). */
  available: number
  maxMemory?: number
  maxContext?: number
  /** Element size of KV and conv state on this backend (CPU keeps fp32: 4). */
  kvElementBytes?: number
  /** Tokens per step (chunked prefill) and sequences per step the scheduler will use. */
  tokenBudget?: number
  maxBatch?: number
  /**
   * Where the model lives: host memory (CPU backend, the default) or a device backend's memory, where
   * `available` is the device's free memory and the backend's own scratch (weights dequantised to bf16 for
   * the prefill GEMMs) is planned too.
   */
  memory?: {kind: 'host'} | {kind: 'device'; backend: string; total: number}
}

export interface MemoryPlan {
  /** What the budget is: 'host memory' or e.g. 'cuda device memory (free of total)'. */
  memory: string
  budget: number
  weights: number
  draft: number
  scratch: number
  state: StateSizes
  contextLimit: number
  batchLimit: number
  /** Total KV tokens all sequences together may hold. */
  kvCapacityTokens: number
  kvBytes: number
  /** Of kvBytes, what the prefix cache may hold (saved KV blocks and recurrent states). */
  cacheBytes: number
  fits: boolean
  /** The smallest useful configuration's total (one sequence at MIN_CONTEXT). */
  minimum: number
}

export const MIN_CONTEXT = 4096
const CONTEXT_STEP = 256

export function linearLayers(c: ModelConfig): number {
  return c.layer_types.filter(t => t === 'linear_attention').length
}

export function fullLayers(c: ModelConfig): number {
  return c.layer_types.filter(t => t === 'full_attention').length
}

/**
 * How a verify step's GDN/conv state rolls back to the accepted prefix — the rule the native model applies at open
 * (core-native/model/rollback.cpp): replay the kept tokens from the block's start state when one linear layer's
 * recurrent state is 1 MiB or more, else keep the state after every verified position. $SPLASH_GDN_ROLLBACK
 * (replay | states) overrides it.
 */
export function gdnRollback(c: ModelConfig, env: NodeJS.ProcessEnv = process.env): 'replay' | 'states' {
  const forced = env.SPLASH_GDN_ROLLBACK
  if (forced === 'replay' || forced === 'states') return forced
  const state = (c.linear_num_value_heads ?? 0) * (c.linear_key_head_dim ?? 0) * (c.linear_value_head_dim ?? 0) * 4
  return state >= 1024 ** 2 ? 'replay' : 'states'
}

/** Per-sequence state sizes: the one place they are computed. */
export function stateSizes(
  c: ModelConfig,
  draft: DraftConfig | null,
  kvElementBytes: number,
  rollback: 'replay' | 'states' = gdnRollback(c),
): StateSizes {
  const nk = c.linear_num_key_heads ?? 0
  const nv = c.linear_num_value_heads ?? 0
  const dk = c.linear_key_head_dim ?? 0
  const dv = c.linear_value_head_dim ?? 0
  const k = c.linear_conv_kernel_dim ?? 4
  const convChannels = 2 * nk * dk + nv * dv
  const perLinear = nv * dk * dv * 4 + (k - 1) * convChannels * kvElementBytes
  const recurrentBytes = linearLayers(c) * perLinear
  const targetKv = fullLayers(c) * 2 * c.num_key_value_heads * c.head_dim * kvElementBytes
  const sliding = draftSlidingLayers(draft)
  const draftRow = draft ? 2 * draft.num_key_value_heads * draft.head_dim * kvElementBytes : 0
  const draftKv = draft ? (draft.num_hidden_layers - sliding) * draftRow : 0
  const draftWindowBytes = draft && sliding > 0 ? sliding * draftRow * 2 * (draft.sliding_window! + draft.block_size) : 0
  // A verify step of one block keeps, for the rollback: the state at its start and each token's conv input and
  // gates per linear layer (replay), or the state after every position (states). Without a draft: nothing.
  const block = draft?.block_size ?? 0
  const replayPerToken = linearLayers(c) * (convChannels + 2 * nv) * 4
  const speculativeBytes =
    block === 0 || recurrentBytes === 0 ? 0 : rollback === 'replay' ? recurrentBytes + block * replayPerToken : (block + 1) * recurrentBytes
  const draftRowsBytes = block > 1 ? (block - 1) * c.vocab_size * 4 : 0
  return {recurrentBytes, kvBytesPerToken: targetKv + draftKv, draftWindowBytes, speculativeBytes, draftRowsBytes}
}

/**
 * What one request holds whatever its length: recurrent state, the verify step's rollback, the draft's rings and
 * its sampled distributions.
 */
export function perRequestBytes(s: StateSizes): number {
  return s.recurrentBytes + s.speculativeBytes + s.draftWindowBytes + s.draftRowsBytes
}

/** Draft layers attending through a sliding window (DFlash 2 `layer_types`; none without a window). */
export function draftSlidingLayers(draft: DraftConfig | null): number {
  if (!draft?.sliding_window) return 0
  return (draft.layer_types ?? []).filter(t => t === 'sliding_attention').length
}

/**
 * A device backend's own scratch: the prefill and verify GEMMs dequantise a weight to bf16 (its largest, the
 * LM head when more than a few rows need logits) into a buffer grown by half again, plus 256 MiB for the
 * runtime's workspaces (cuBLAS, attention partials).
 */
export function deviceScratchBytes(c: ModelConfig): number {
  const largest = Math.max(
    c.vocab_size * c.hidden_size,
    c.intermediate_size * c.hidden_size,
    c.num_attention_heads * c.head_dim * 2 * c.hidden_size,
  )
  return Math.ceil(largest * 2 * 1.5) + 256 * 1024 ** 2
}

/**
 * Activations of one step: the widest projection for every token of the budget, plus logits rows, twice: constrained
 * rows keep a copy for a second draw under their grammar mask (StepItem.keep, model/resample.cpp).
 */
export function scratchBytes(c: ModelConfig, tokenBudget: number, maxBatch: number, draftBlock: number): number {
  const widest = Math.max(
    c.hidden_size * 4,
    2 * c.intermediate_size,
    2 * (c.moe_intermediate_size ?? 0) * (c.num_experts_per_tok ?? 0),
    c.num_attention_heads * c.head_dim * 2 + 2 * c.num_key_value_heads * c.head_dim,
    2 * (c.linear_num_key_heads ?? 0) * (c.linear_key_head_dim ?? 0) + 2 * (c.linear_num_value_heads ?? 0) * (c.linear_value_head_dim ?? 0),
  )
  const rows = Math.max(tokenBudget, maxBatch * draftBlock)
  const activations = rows * (widest + 4 * c.hidden_size) * 4
  const logits = maxBatch * draftBlock * c.vocab_size * 4
  return activations + 2 * logits
}

export function planMemory(input: PlanInput): MemoryPlan {
  const c = input.manifest.config
  const draftCfg = input.manifest.draft?.config ?? null
  const elem = input.kvElementBytes ?? 4
  const tokenBudget = input.tokenBudget ?? 512
  const maxBatch = input.maxBatch ?? 16
  const state = stateSizes(c, draftCfg, elem)
  const perSeq = perRequestBytes(state)
  const budget = input.maxMemory !== undefined ? Math.min(input.maxMemory, input.available) : input.available
  const device = input.memory?.kind === 'device' ? input.memory : null
  const scratch = scratchBytes(c, tokenBudget, maxBatch, draftCfg?.block_size ?? 1) + (device ? deviceScratchBytes(c) : 0)
  const fixed = input.weightBytes + input.draftBytes + scratch
  const minimum = fixed + perSeq + MIN_CONTEXT * state.kvBytesPerToken
  const free = budget - fixed
  const window = Math.min(c.max_position_embeddings, input.maxContext ?? c.max_position_embeddings)
  const byMemory = state.kvBytesPerToken > 0 ? Math.floor((free - perSeq) / state.kvBytesPerToken) : window
  let contextLimit = Math.min(window, byMemory)
  contextLimit = contextLimit >= CONTEXT_STEP ? contextLimit - (contextLimit % CONTEXT_STEP) : contextLimit
  const fits = minimum <= budget && contextLimit >= Math.min(MIN_CONTEXT, window)
  const room = free - contextLimit * state.kvBytesPerToken
  const batchLimit = fits ? Math.max(1, Math.min(maxBatch, Math.floor(room / Math.max(perSeq, 1)))) : 0
  const kvBytes = fits ? free - batchLimit * perSeq : 0
  const kvCapacityTokens = state.kvBytesPerToken > 0 ? Math.floor(kvBytes / state.kvBytesPerToken) : Number.MAX_SAFE_INTEGER
  return {
    memory: device
      ? `${device.backend} device memory (${formatBytes(input.available)} free of ${formatBytes(device.total)})`
      : 'host memory',
    budget,
    weights: input.weightBytes,
    draft: input.draftBytes,
    scratch,
    state,
    contextLimit: fits ? contextLimit : 0,
    batchLimit,
    kvCapacityTokens,
    kvBytes,
    // half the KV memory for running requests, half for the prefix cache
    cacheBytes: Math.floor(kvBytes / 2),
    fits,
    minimum,
  }
}

/** The plan as a short table for `splash serve`. */
export function formatPlan(p: MemoryPlan): string[] {
  const row = (k: string, v: string) => `  ${k.padEnd(24)}${v}`
  const lines = [
    'Memory plan',
    row('memory', p.memory),
    row('budget', formatBytes(p.budget)),
    row('weights', formatBytes(p.weights)),
    row('draft', formatBytes(p.draft)),
    row('scratch', formatBytes(p.scratch)),
    row('state per request', formatBytes(perRequestBytes(p.state))),
    row('KV per token', formatBytes(p.state.kvBytesPerToken)),
  ]
  if (p.fits) {
    lines.push(
      row('KV cache', `${formatBytes(p.kvBytes)} (${p.kvCapacityTokens.toLocaleString('en-US')} tokens)`),
      row('prefix cache', `${formatBytes(p.cacheBytes)} of it`),
      row('context limit', `${p.contextLimit.toLocaleString('en-US')} tokens`),
      row('batch limit', `${p.batchLimit} requests`),
    )
  } else {
    lines.push(row('needed at least', `${formatBytes(p.minimum)} (one request with a ${MIN_CONTEXT}-token context)`))
  }
  return lines
}

export function assertFits(p: MemoryPlan): void {
  if (p.fits) return
  throw new SplashError(
    'model_does_not_fit',
    'invalid_request',
    // the plan itself is printed once, before this (loadModel logs formatPlan)
    `the model does not fit: it needs at least ${formatBytes(p.minimum)} and ${formatBytes(p.budget)} of ${p.memory} is available (the memory plan above shows where it goes)`,
  )
}
