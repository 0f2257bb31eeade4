// The memory plan: from the memory the backend offers (or --max-memory), what the model needs —
// weights, draft, per-request state, KV per token, scratch — and so the context limit, the batch
// limit and the KV capacity. The per-sequence state sizes come from the native core (stateSizes).
import type {Manifest, ModelConfig} from '../package/manifest.js'
import {native} from '../native/native.js'
import {formatBytes} from '../config/units.js'
import {SplashError} from '../errors.js'

export interface StateSizes {
  /** Recurrent (GDN) state plus conv state of one sequence, all linear layers. */
  recurrentBytes: number
  /** Attention KV bytes per token, all full-attention layers (target and draft). */
  kvBytesPerToken: number
  /**
   * The draft's sliding-window layers, per sequence: each keeps a ring of window + block positions, stored twice
   * (core-native/model/state/draft_kv.cpp), whatever the context length; at most this (a short sequence keeps fewer rows).
   */
  draftWindowBytes: number
  /** What a verify step keeps per sequence for the GDN rollback (core-native/model/state/rollback.cpp); 0 without a draft. */
  speculativeBytes: number
  /**
   * A sampled draft pass's distributions, kept per sequence for the verify pass (block − 1 rows of the vocabulary in
   * fp32; on a GPU in device memory: core-native/model/step/draft.cpp); 0 without a draft.
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

/**
 * Per-sequence state sizes of a package's model, from the native core (core-native/model/state/state_sizes.cpp: the sizes
 * the model allocates by), with KV and conv state of `kvElementBytes` per value. `rollback` forces the GDN rollback
 * method a verify step uses; by default the native rule (replay from 1 MiB of recurrent state per linear layer, or
 * $SPLASH_GDN_ROLLBACK) chooses it, as a model opening now would.
 */
export function stateSizes(
  manifest: Pick<Manifest, 'family' | 'config' | 'draft'>,
  kvElementBytes: number,
  rollback?: 'replay' | 'states',
): StateSizes {
  const s = native.stateSizes(manifest, {kvElementBytes, ...(rollback ? {rollback} : {})})
  return {
    recurrentBytes: s.recurrentBytes,
    kvBytesPerToken: s.kvBytesPerToken,
    draftWindowBytes: s.draftWindowBytes,
    speculativeBytes: s.speculativeBytes,
    draftRowsBytes: s.draftRowsBytes,
  }
}

/**
 * What one request holds whatever its length: recurrent state, the verify step's rollback, the draft's rings and
 * its sampled distributions.
 */
export function perRequestBytes(s: StateSizes): number {
  return s.recurrentBytes + s.speculativeBytes + s.draftWindowBytes + s.draftRowsBytes
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
 * rows keep a copy for a second draw under their grammar mask (StepItem.keep, model/step/resample.cpp).
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

/**
 * The KV memory the plan reserves (running requests and, half of it, the prefix cache): what the batch limit of
 * requests at the full context can hold, not every free byte, and in host memory at most half of what the machine
 * has available, so a small model with a long window leaves the machine usable. Never less than one full context.
 */
function kvReserve(room: number, contextLimit: number, batchLimit: number, kvBytesPerToken: number, input: PlanInput): number {
  const full = contextLimit * kvBytesPerToken
  const batch = full * batchLimit
  const share = input.memory?.kind === 'device' ? Infinity : Math.floor(input.available / 2)
  return Math.max(full, Math.min(room, batch, share))
}

export function planMemory(input: PlanInput): MemoryPlan {
  const c = input.manifest.config
  const draftCfg = input.manifest.draft?.config ?? null
  const elem = input.kvElementBytes ?? 4
  const tokenBudget = input.tokenBudget ?? 512
  const maxBatch = input.maxBatch ?? 16
  const state = stateSizes(input.manifest, elem)
  const perSeq = perRequestBytes(state)
  const budget = input.maxMemory !== undefined ? Math.min(input.maxMemory, input.available) : input.available
  const device = input.memory?.kind === 'device' ? input.memory : null
  const scratch = scratchBytes(c, tokenBudget, maxBatch, draftCfg?.block_size ?? 1) + (device ? deviceScratchBytes(c) : 0)
  const fixed = input.weightBytes + input.draftBytes + scratch
  const minimum = fixed + perSeq + MIN_CONTEXT * state.kvBytesPerToken
  const free = budget - fixed
  const window = Math.min(c.max_position_embeddings, input.maxContext ?? c.max_position_embeddings)
  const byMemory = state.kvBytesPerToken > 0 ? Math.floor((free - perSeq) / state.kvBytesPerToken) : window
  // the window as asked when it fits; cut to a multiple of CONTEXT_STEP only when memory is what limits it
  const contextLimit = byMemory >= window ? window : byMemory >= CONTEXT_STEP ? byMemory - (byMemory % CONTEXT_STEP) : byMemory
  const fits = minimum <= budget && contextLimit >= Math.min(MIN_CONTEXT, window)
  const room = free - contextLimit * state.kvBytesPerToken
  const batchLimit = fits ? Math.max(1, Math.min(maxBatch, Math.floor(room / Math.max(perSeq, 1)))) : 0
  const kvBytes = fits ? kvReserve(free - batchLimit * perSeq, contextLimit, batchLimit, state.kvBytesPerToken, input) : 0
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
      row('KV cache', `${formatBytes(p.kvBytes)} (${p.kvCapacityTokens.toLocaleString('en-US')} tokens; ${formatBytes(p.contextLimit * p.state.kvBytesPerToken)} per full context)`),
      row('prefix cache', `${formatBytes(p.cacheBytes)} of it`),
      row('context limit', `${p.contextLimit.toLocaleString('en-US')} tokens`),
      row('batch limit', `${p.batchLimit} requests`),
    )
  } else {
    lines.push(row('needed at least', `${formatBytes(p.minimum)} (one request with a ${MIN_CONTEXT}-token context)`))
  }
  return lines
}

/** Total memory the plan takes: weights, draft, scratch, every request's state and the KV reserve. */
export function plannedBytes(p: MemoryPlan): number {
  return p.weights + p.draft + p.scratch + p.batchLimit * perRequestBytes(p.state) + p.kvBytes
}

/**
 * A --max-context the package or the memory cannot serve is refused, never quietly clamped: the message names the
 * package's own window, or the longest context that fits.
 */
export function assertContext(p: MemoryPlan, manifest: Manifest, maxContext: number | undefined): void {
  if (maxContext === undefined) return
  const native = manifest.config.max_position_embeddings
  if (maxContext > native) {
    throw new SplashError(
      'context_too_long',
      'invalid_request',
      `--max-context ${maxContext} is more than ${manifest.name} supports: its window is ${native.toLocaleString('en-US')} tokens; ask for ${native} or less, or serve a package with a longer window`,
    )
  }
  if (p.fits && p.contextLimit < maxContext) {
    throw new SplashError(
      'context_does_not_fit',
      'invalid_request',
      `--max-context ${maxContext} does not fit in ${formatBytes(p.budget)} of ${p.memory}: at most ${p.contextLimit} tokens do; ask for that or less, or give more memory with --max-memory`,
    )
  }
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
