// The native engine as the scheduler's StepModel: one loaded package, its sequences and its step.
import {readOptions} from '../config/options.js'
import {native, type ModelHandle, type ModelInfo, type OpenModelOptions} from './native.js'
import type {SampleRequest, SampledToken} from '../engine/sampling.js'
import {InlinePolicy, inlineEnabled, loopTurn} from './inline-steps.js'
import type {CallHint, DraftRequest, StepItem, StepModel, StepResult} from '../engine/step-model.js'
import type {StateStore} from '../cache/state-store.js'

/** SPLASH_DRAFT=off (or 0/false/no) disables speculative decoding: diagnosis and tests only. */
export function draftDisabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return readOptions(env).draftOff
}

export class NativeModel implements StepModel {
  private closed = false
  // image encodes in flight: one holds the model's compute lock on a pool thread, and an inline step would wait
  // for it on the JS thread, so calls stay queued meanwhile; `encodes` counts those begun, so a call that overlapped
  // one (its wall time is mostly the wait for the lock) is kept out of the inline policy's average
  private encoding = 0
  private encodes = 0
  private readonly inlineSteps: InlinePolicy
  private readonly inlineDrafts: InlinePolicy
  readonly store: StateStore

  private constructor(
    readonly handle: ModelHandle,
    readonly info: ModelInfo,
    readonly contextLength: number,
  ) {
    const h = handle
    this.inlineSteps = new InlinePolicy(inlineEnabled(info.backend))
    this.inlineDrafts = new InlinePolicy(inlineEnabled(info.backend))
    this.store = {
      saveRows: (seq, start, n) => native.saveRows(h, seq, start, n),
      saveState: (seq, length) => native.saveState(h, seq, length),
      restore: (seq, rows, state) => native.restoreSequence(h, seq, rows, state),
      freeSaved: id => {
        if (!this.closed) native.freeSaved(h, id)
      },
      exportSaved: id => native.exportSaved(h, id),
      importSaved: p =>
        p.kind === 'rows' ? native.importRows(h, p.n, p.draft, p.data) : native.importState(h, p.length, p.draft, p.windowLength, p.data, p.window),
      rowBytes: info.kvBytesPerToken + (info.draft?.kvBytesPerToken ?? 0),
      stateBytes: info.stateBytesPerSequence + (info.draft?.savedWindowBytes ?? 0),
    }
  }

  static async open(dir: string, contextLength: number, options: OpenModelOptions = {}): Promise<NativeModel> {
    // Default activations (int8x2): every q4/q8 matmul computes each (row, token) the same way whatever
    // the token count, and a `verify` step runs GDN row by row in the recurrent form, so a verification
    // pass equals single-token decodes bit for bit (test/core-native/spec.test.ts).
    const handle = await native.openModel(dir, {draft: !draftDisabled(), ...options})
    const info = native.modelInfo(handle)
    return new NativeModel(handle, info, Math.min(contextLength, info.maxPositionEmbeddings))
  }

  get vocabSize(): number {
    return this.info.vocabSize
  }

  get draftBlockSize(): number {
    return this.info.draft?.blockSize ?? 0
  }

  get backend(): string {
    return this.info.backend
  }

  get hostThreads(): number {
    return this.info.backend === 'cpu' ? this.info.threads : 0
  }

  createSequence(maxLength: number): number {
    return native.createSequence(this.handle, {maxLength})
  }

  freeSequence(seq: number): void {
    if (!this.closed) native.freeSequence(this.handle, seq)
  }

  step(items: StepItem[], hint: CallHint = {}): Promise<StepResult[]> {
    const tokens = items.reduce((n, it) => n + it.tokens.length, 0)
    return this.call(this.inlineSteps, tokens, hint, inline => native.step(this.handle, items, {inline}))
  }

  draft(items: DraftRequest[], hint: CallHint = {}): Promise<StepResult[]> {
    const tokens = items.reduce((n, it) => n + 1 + it.n, 0)
    return this.call(this.inlineDrafts, tokens, hint, inline => native.draft(this.handle, items, {inline}))
  }

  /** A step or draft pass, inline when its policy says so (then the event loop gets a turn after it). */
  private async call<T>(policy: InlinePolicy, tokens: number, hint: CallHint, run: (inline: boolean) => Promise<T>): Promise<T> {
    const inline = this.encoding === 0 && policy.choose(tokens, hint.concurrent ?? false)
    const t0 = performance.now()
    // undefined while an encode runs; a call that overlapped one mostly waited for its lock, which is no step's time
    const encodesBefore = this.encoding === 0 ? this.encodes : undefined
    try {
      return await run(inline)
    } finally {
      if (encodesBefore === this.encodes) policy.observe(tokens, performance.now() - t0)
      if (inline) await loopTurn()
    }
  }

  get encodeImage(): StepModel['encodeImage'] {
    if (!this.info.vision) return undefined
    return async (pixels, grid) => {
      this.encoding++
      this.encodes++
      try {
        return await native.encodeImage(this.handle, {pixels, grid})
      } finally {
        this.encoding--
      }
    }
  }

  resample(seq: number, row: number, sample: SampleRequest): SampledToken {
    return native.resample(this.handle, seq, row, sample)
  }

  truncate(seq: number, length: number): void {
    native.truncateSequence(this.handle, seq, length)
  }

  /** Live sequences and saved prefix-cache pieces held natively (leak checks). */
  savedStats() {
    return native.savedStats(this.handle)
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    native.closeModel(this.handle)
  }
}

