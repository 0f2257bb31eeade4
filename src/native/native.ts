// The only module that loads the native core (core-native/build/Release/splash_core.node). It gives the
// addon TypeScript types and turns every native failure into a NativeError (a SplashError carrying the
// native `code`). Works from src/native/*.ts (tests) and from dist/src/native/*.js (the build).
import {createRequire} from 'node:module'
import {existsSync} from 'node:fs'
import {fileURLToPath} from 'node:url'
import path from 'node:path'
import {SplashError, type ErrorKind} from '../errors.js'
import type {SampleRequest, SampledToken} from '../engine/sampling.js'
import type {StepItem} from '../engine/step-model.js'
import type {SavedPiece} from '../cache/state-store.js'

const here = path.dirname(fileURLToPath(import.meta.url))
const fromBuild = import.meta.url.endsWith('.js') && here.split(path.sep).includes('dist')
export const projectRoot = path.resolve(here, '..', '..', fromBuild ? '..' : '')
export const addonPath = path.join(projectRoot, 'core-native', 'build', 'Release', 'splash_core.node')

/** Codes the native core reports, and the error kind each maps to. */
const NATIVE_KINDS = {
  invalid_argument: 'invalid_request',
  bad_token: 'invalid_request',
  too_long: 'invalid_request',
  sequence_busy: 'invalid_request',
  sequence_broken: 'invalid_request',
  state_not_truncatable: 'invalid_request',
  unknown_model: 'not_found',
  unknown_sequence: 'not_found',
  not_a_package: 'invalid_request',
  bad_package: 'invalid_request',
  io_error: 'not_found',
  unsupported: 'invalid_request',
  out_of_memory: 'unavailable',
  native_unavailable: 'unavailable',
  internal: 'internal',
} as const satisfies Record<string, ErrorKind>

export type NativeErrorCode = keyof typeof NATIVE_KINDS

export class NativeError extends SplashError {
  declare readonly code: NativeErrorCode
  constructor(code: NativeErrorCode, message: string, options: {cause?: unknown} = {}) {
    super(code, NATIVE_KINDS[code] ?? 'internal', message, options)
    this.name = 'NativeError'
  }
}

function isNativeCode(code: unknown): code is NativeErrorCode {
  return typeof code === 'string' && Object.hasOwn(NATIVE_KINDS, code)
}

/** Wraps anything the addon threw or rejected with as a NativeError. */
export function toNativeError(err: unknown): NativeError {
  if (err instanceof NativeError) return err
  const e = err as {code?: unknown; message?: unknown}
  const message = typeof e?.message === 'string' ? e.message : String(err)
  return new NativeError(isNativeCode(e?.code) ? e.code : 'internal', message, {cause: err})
}

export type ModelHandle = number
export type SequenceId = number
export type LogitsMode = 'none' | 'last' | 'all'
export type Isa = 'scalar' | 'avx2' | 'avx512'

export interface OpenModelOptions {
  /** Compute threads (default: hardware cores). */
  threads?: number
  /** Force an instruction set (default: the best this CPU has). */
  isa?: Isa
  /**
   * Activations of q4/q8 matmuls: 'int8x2' (default: two int8 levels per 64-group, near-fp32 accuracy at
   * integer speed), 'int8' (one level: fastest, ~0.5% noise per matmul), 'f32' (fp32: the parity path).
   */
  activations?: MatmulActivations
  /** Shorthand: true = 'int8', false = 'f32' (`activations` wins when both are given). */
  int8?: boolean
  /** Load the package's DFlash draft when it has one (default true; SPLASH_DRAFT=off sets false in NativeModel). */
  draft?: boolean
  /** On a device backend, the cap on its device memory in bytes (weights, state, activations): `--max-memory`. */
  maxMemory?: number
}

/** A device backend's memory: the device's free and total bytes, what this backend holds and its cap (0: none). */
export interface DeviceMemory {
  free: number
  total: number
  used: number
  limit: number
}

/** The backend openModel would choose now (backendInfo()), before any model is loaded. */
export interface BackendInfo {
  backend: 'cpu' | 'cuda'
  /** CPU instruction set, or the device architecture ('sm_90'). */
  isa: string
  /** null on the CPU backend (host memory: the planner reads MemAvailable). */
  deviceMemory: DeviceMemory | null
  /** Why the CUDA backend was not chosen, when it was tried; else ''. */
  note: string
  /** The operations the backend has, by slot name (core-native/include/splash/backend.h SPLASH_BACKEND_OPS). */
  ops: string[]
}

/** The loaded DFlash draft (modelInfo().draft), or null. */
export interface DraftInfo {
  /** Block length B: the anchor plus B−1 drafted tokens per draft pass. */
  blockSize: number
  maskTokenId: number
  numLayers: number
  targetLayerIds: number[]
  /**
   * Draft context K/V bytes per position: the full-attention draft layers only (a sliding-window layer keeps a
   * fixed ring of window + B positions per sequence).
   */
  kvBytesPerToken: number
  /** Draft bytes a saved prefix-cache state carries: the sliding layers' K/V of its last window − 1 positions. */
  savedWindowBytes: number
  /**
   * How a verify step's GDN/conv state rolls back to the accepted prefix: 'states' keeps the state after every
   * verified position, 'replay' the block's start state and each position's recurrence inputs, re-run on rollback
   * (chosen at open; $SPLASH_GDN_ROLLBACK=replay|states overrides).
   */
  gdnRollback: 'replay' | 'states'
  /** Bytes a verify step of blockSize tokens keeps for that rollback, per sequence. */
  rollbackBytes: number
}

export interface DraftItem {
  seq: SequenceId
  /** The anchor: the last committed token, not yet processed by the target (it sits at sequenceLength). */
  token: number
  /** Drafted positions wanted, 1..B−1 (default B−1): the logits returned are [n·V]. 0: only take in the pending context (no block, empty logits; every item of the call must then be 0). */
  n?: number
  /** Sample the drafted rows inside the pass (rows.length ≤ n: the trailing rows). */
  sample?: SampleRequest
  /** Return the logits rows too (default: true without `sample`, false with it). */
  logits?: boolean
}

/**
 * How a step or draft pass runs: by default on a thread of libuv's pool (the promise settles on a later turn of the
 * event loop); with `inline` on the calling thread, the promise settled when the call returns. Inline spares the two
 * thread hand-offs (to the pool thread and back to the event loop, ~0.1–0.2 ms each step on a 2-core VM) and blocks
 * the event loop for the step's length (src/native/inline-steps.ts decides).
 */
export interface CallOptions {
  inline?: boolean
}

/** What one step or draft item gets back. */
export interface StepResult {
  /** The logits rows asked for ([rows × V]), or null. */
  logits: Float32Array | null
  /** The sampled rows (one per `sample.rows` entry), or null without `sample`. */
  sampled: SampledToken[] | null
}

export type MatmulActivations = 'f32' | 'int8' | 'int8x2'

export interface ModelInfo {
  name: string | null
  family: 'qwen3_5' | 'qwen3_5_moe' | 'qwen3_next' | 'qwen3'
  /** The normalised config from splash.json, echoed. */
  config: Record<string, unknown>
  vocabSize: number
  hiddenSize: number
  numLayers: number
  maxPositionEmbeddings: number
  /** Bytes of tensor data mapped from the package. */
  weightBytes: number
  /** Fixed per-sequence state (GDN conv + recurrent state of every linear layer), bytes. */
  stateBytesPerSequence: number
  /** KV cache bytes per token of one sequence (all full-attention layers). */
  kvBytesPerToken: number
  /** The backend the model runs on, and its variant: the CPU's ISA (Isa) or the GPU architecture (sm_90). */
  backend: 'cpu' | 'cuda'
  isa: string
  /** The host threads of the model's pool (the CPU backend's matmuls run on them). */
  threads: number
  /** The device's memory and this model's share of it (device backends), or null. */
  deviceMemory: DeviceMemory | null
  /** The package's specialised kernels when they are loaded and used ('cuda-sm90'), else null. */
  specialisedKernels: 'cuda-sm90' | null
  activationType: 'f32'
  kvType: 'f32'
  /** What q4/q8 matmuls use for activations in this model. */
  matmulActivations: MatmulActivations
  draft: DraftInfo | null
  /** The vision encoder, or null (no `vision` in the package). */
  vision: VisionInfo | null
}

export interface VisionInfo {
  /** Values per patch row of encodeImage's pixels (channels × temporal × patch × patch). */
  patchDim: number
  mergeSize: number
  patchSize: number
  temporalPatchSize: number
}

export interface EncodeImageInput {
  /** The image processor's patches, [t·h·w × patchDim], merge groups contiguous (models/qwen3_5/image-preprocess.ts). */
  pixels: Float32Array
  /** [t, h, w] in patches. */
  grid: [number, number, number]
}

/** One item of a step (the engine's contract, src/engine/step-model.ts, is the one definition). */
export type {StepItem}

/** What a model holds (leak checks): live sequences, saved KV row ranges and states, and their bytes. */
export interface SavedStats {
  sequences: number
  rows: number
  states: number
  bytes: number
  /** Idle sequence buffers kept for reuse (bounded by the most that live sequences held at once). */
  pooled: number
}

export interface KernelCheck {
  kernel: string
  isa: Isa
  against: 'reference' | 'scalar'
  maxErr: number
  tol: number
  ok: boolean
}

export interface BenchOptions {
  rows: number
  cols: number
  dtype?: 'q4' | 'q8' | 'bf16' | 'f32'
  threads?: number
  int8?: boolean
  activations?: MatmulActivations
  iters?: number
  isa?: Isa
}

export interface BenchResult {
  isa: Isa
  threads: number
  rows: number
  cols: number
  dtype: string
  int8: boolean
  activations: MatmulActivations
  weightBytes: number
  secondsPerMatvec: number
  matvecGBps: number
  readGBps: number
  memcpyGBps: number
}

export interface RunMatmulOptions {
  dtype: 'q4' | 'q8' | 'bf16' | 'f32'
  rows: number
  cols: number
  /** Stored bytes: F32 values, BF16 bits, or packed U32 words (q4/q8, MLX layout). */
  weight: Float32Array | Uint16Array | Uint32Array | Uint8Array
  scales?: Uint16Array
  biases?: Uint16Array
  /** [nt, cols] activations */
  x: Float32Array
  nt: number
  int8?: boolean
  /** Two-level int8 activations (wins over int8). */
  int8x2?: boolean
  isa?: Isa
  /** Mark the weight SPLASH_WEIGHT_EXACT (never int8 activations). */
  exact?: boolean
}

/** Per-sequence state sizes of a package's model, bytes (native.stateSizes). */
export interface NativeStateSizes {
  recurrentBytes: number
  kvBytesPerToken: number
  draftWindowBytes: number
  speculativeBytes: number
  draftRowsBytes: number
  gdnRollback: 'replay' | 'states'
}

interface Binding {
  abiVersion: number
  backendInfo(): BackendInfo
  stateSizes(manifestJson: string, opts?: {kvElementBytes?: number; rollback?: 'replay' | 'states'}): NativeStateSizes
  openModel(dir: string, opts?: OpenModelOptions): Promise<ModelHandle>
  modelInfo(h: ModelHandle): ModelInfo
  sequenceBytes(h: ModelHandle, maxLength: number): number
  createSequence(h: ModelHandle, opts: {maxLength: number}): SequenceId
  freeSequence(h: ModelHandle, seq: SequenceId): void
  truncateSequence(h: ModelHandle, seq: SequenceId, length: number): void
  sequenceLength(h: ModelHandle, seq: SequenceId): number
  step(h: ModelHandle, items: StepItem[], opts?: CallOptions): Promise<StepResult[]>
  draft(h: ModelHandle, items: DraftItem[], opts?: CallOptions): Promise<StepResult[]>
  resample(h: ModelHandle, seq: SequenceId, row: number, sample: SampleRequest): SampledToken
  saveRows(h: ModelHandle, seq: SequenceId, start: number, n: number): number
  saveState(h: ModelHandle, seq: SequenceId, length?: number): number
  restoreSequence(h: ModelHandle, seq: SequenceId, rows: number[], state: number): boolean
  freeSaved(h: ModelHandle, id: number): void
  exportSaved(h: ModelHandle, id: number): SavedPiece
  importRows(h: ModelHandle, n: number, draft: boolean, data: Float32Array): number
  importState(h: ModelHandle, length: number, draft: boolean, windowLength: number, data: Float32Array, window: Float32Array): number
  savedStats(h: ModelHandle): SavedStats
  encodeImage(h: ModelHandle, input: EncodeImageInput): Promise<Float32Array>
  closeModel(h: ModelHandle): void
  isaList(): Isa[]
  kernelSelfTest(seed?: number): Promise<KernelCheck[]>
  benchMatmul(opts: BenchOptions): Promise<BenchResult>
  runMatmul(opts: RunMatmulOptions): Float32Array
  sampleLogits(logits: Float32Array, vocab: number, sample: SampleRequest): SampledToken[]
}

let binding: Binding | undefined

function load(): Binding {
  if (binding) return binding
  if (!existsSync(addonPath)) {
    throw new NativeError('native_unavailable', `the native core is not built (${addonPath}); run \`npm run build:native\``)
  }
  try {
    binding = createRequire(import.meta.url)(addonPath) as Binding
  } catch (err) {
    throw new NativeError('native_unavailable', `cannot load the native core: ${(err as Error).message}`, {cause: err})
  }
  return binding
}

function sync<T>(fn: () => T): T {
  try {
    return fn()
  } catch (err) {
    throw toNativeError(err)
  }
}

async function async<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    throw toNativeError(err)
  }
}

/** The typed native API. Every function throws (or rejects with) NativeError. */
export const native = {
  available(): boolean {
    try {
      load()
      return true
    } catch {
      return false
    }
  },
  /** The backend interface version the addon was built with. */
  abiVersion: () => sync(() => load().abiVersion),
  /** The backend a model would open on now ($SPLASH_BACKEND, else CUDA when a device is present) and its memory. */
  backendInfo: () => sync(() => load().backendInfo()),
  /**
   * The per-sequence state sizes a model of this package keeps (recurrent and conv state, KV per token, the draft's
   * rings, the verify step's rollback, the sampled draft rows), computed where the model computes them, for the
   * memory plan before any model opens. `manifest`: splash.json's family, config and draft.
   */
  stateSizes: (
    manifest: {family: string; config: unknown; draft?: {config: unknown} | null},
    opts: {kvElementBytes?: number; rollback?: 'replay' | 'states'} = {},
  ) => sync(() => load().stateSizes(JSON.stringify({family: manifest.family, config: manifest.config, draft: manifest.draft ?? null}), opts)),
  openModel: (dir: string, opts: OpenModelOptions = {}) => async(() => load().openModel(dir, opts)),
  modelInfo: (h: ModelHandle) => sync(() => load().modelInfo(h)),
  /** Bytes one sequence of `maxLength` tokens needs (state + KV), for the memory planner. */
  sequenceBytes: (h: ModelHandle, maxLength: number) => sync(() => load().sequenceBytes(h, maxLength)),
  createSequence: (h: ModelHandle, opts: {maxLength: number}) => sync(() => load().createSequence(h, opts)),
  freeSequence: (h: ModelHandle, seq: SequenceId) => sync(() => load().freeSequence(h, seq)),
  /**
   * KV truncate (and draft context). Linear-attention state rolls back only to 0, the current length, or a
   * length inside the last `verify` step of that sequence (per-position states); else state_not_truncatable.
   */
  truncateSequence: (h: ModelHandle, seq: SequenceId, length: number) => sync(() => load().truncateSequence(h, seq, length)),
  sequenceLength: (h: ModelHandle, seq: SequenceId) => sync(() => load().sequenceLength(h, seq)),
  /** One batched step over several sequences; per item its logits (null for 'none') and sampled rows. */
  step: (h: ModelHandle, items: StepItem[], opts?: CallOptions) => async(() => load().step(h, items, opts)),
  /** One DFlash draft pass per item: logits of the n drafted positions ([n·V]) and/or their sampled tokens. */
  draft: (h: ModelHandle, items: DraftItem[], opts?: CallOptions) => async(() => load().draft(h, items, opts)),
  /**
   * Row `row` of the sampled rows the last step kept for `seq` (its item had `keep`), drawn again with `sample`
   * (one row, e.g. under the grammar mask that step did not have), on the backend's sampler where it can;
   * synchronous. A verify item's row counts the drafts before it for the penalties, as in the step.
   */
  resample: (h: ModelHandle, seq: SequenceId, row: number, sample: SampleRequest) => sync(() => load().resample(h, seq, row, sample)),
  /** Prefix cache: copies KV rows [start, start+n) of a sequence (target, and draft context when complete); returns an id. */
  saveRows: (h: ModelHandle, seq: SequenceId, start: number, n: number) => sync(() => load().saveRows(h, seq, start, n)),
  /** Prefix cache: copies a sequence's GDN + conv state at its current length, or takes the one its last step kept at `length` (StepItem.snapshots); returns an id. */
  saveState: (h: ModelHandle, seq: SequenceId, length?: number) => sync(() => load().saveState(h, seq, length)),
  /** Puts saved rows covering [0, len) and a saved state at len into a sequence; true when the draft context came back too. */
  restoreSequence: (h: ModelHandle, seq: SequenceId, rows: number[], state: number) =>
    sync(() => load().restoreSequence(h, seq, rows, state)),
  freeSaved: (h: ModelHandle, id: number) => sync(() => load().freeSaved(h, id)),
  /** Disk tier: a copy of saved rows or a saved state as floats on the host. */
  exportSaved: (h: ModelHandle, id: number) => sync(() => load().exportSaved(h, id)),
  /** Disk tier: saved rows made from exported floats (their shape checked against this model); returns an id. */
  importRows: (h: ModelHandle, n: number, draft: boolean, data: Float32Array) => sync(() => load().importRows(h, n, draft, data)),
  /** Disk tier: a saved state made from exported floats (shape checked); returns an id. */
  importState: (h: ModelHandle, length: number, draft: boolean, windowLength: number, data: Float32Array, window: Float32Array) =>
    sync(() => load().importState(h, length, draft, windowLength, data, window)),
  savedStats: (h: ModelHandle) => sync(() => load().savedStats(h)),
  /** The vision encoder on one image: merged embeddings, [t·h·w / merge² × hiddenSize]. */
  encodeImage: (h: ModelHandle, input: EncodeImageInput) => async(() => load().encodeImage(h, input)),
  closeModel: (h: ModelHandle) => sync(() => load().closeModel(h)),
  isaList: () => sync(() => load().isaList()),
  /** Test-only: every matmul path of every ISA this CPU has, against an fp64 reference and the scalar path. */
  kernelSelfTest: (seed?: number) => async(() => load().kernelSelfTest(seed)),
  /** Benchmark: one [rows, cols] matvec vs plain read and memcpy bandwidth in the same process. */
  benchMatmul: (opts: BenchOptions) => async(() => load().benchMatmul(opts)),
  /** Test-only: one matmul y[nt, rows] = x · Wᵀ through the CPU backend (single thread, small inputs). */
  runMatmul: (opts: RunMatmulOptions) => sync(() => load().runMatmul(opts)),
  /**
   * The native sampler on given logits ([rows·vocab]; the trailing sample.rows.length rows), synchronously on
   * the calling thread: rows whose grammar mask is ready only after their step, tests and benchmarks.
   */
  sampleLogits: (logits: Float32Array, vocab: number, sample: SampleRequest) => sync(() => load().sampleLogits(logits, vocab, sample)),
}
