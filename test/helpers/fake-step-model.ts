// A step model in plain TypeScript for the scheduler's and the prefix cache's unit tests (no native engine): each
// sequence is the list of tokens fed to it, the "logits" are a hash of that list, so the next token is a pure
// function of the sequence's content (and, at T > 0, of the row's uniform). Its state store saves token lists
// and checks what the scheduler restores, so a wrong restore or a double free fails loudly. It records every step.
import type {DraftRequest, StepItem, StepModel, StepResult} from '../../src/engine/step-model.js'
import type {SavedPiece, StateStore} from '../../src/cache/state-store.js'
import type {SampleRequest, SampleRow, SampledToken} from '../../src/engine/sampling.js'
import {SplashError} from '../../src/errors.js'

/** The fake's greedy choice after `tokens`: an FNV hash of the whole list, modulo the vocabulary. */
export function nextToken(tokens: ArrayLike<number>, vocab: number, uniform?: number): number {
  let h = 0x811c9dc5
  for (let i = 0; i < tokens.length; i++) h = Math.imul(h ^ tokens[i]!, 0x01000193)
  const base = (h >>> 0) % vocab
  return uniform === undefined ? base : (base + Math.floor(uniform * vocab)) % vocab
}

interface FakeSeq {
  tokens: number[]
  maxLength: number
  /** States the last step kept inside its item (StepItem.snapshots). */
  kept: Set<number>
}

type Piece = {kind: 'rows'; tokens: number[]} | {kind: 'state'; tokens: number[]}

export class FakeStore implements StateStore {
  readonly rowBytes = 4
  readonly stateBytes = 16
  readonly pieces = new Map<number, Piece>()
  private nextId = 1
  /** The model refuses pieces read back from disk (a shape it does not take). */
  refuseImports = false
  /** Exporting a piece throws (the disk tier must only lose the snapshot). */
  failExports = false
  restores = 0

  constructor(private readonly seqs: Map<number, FakeSeq>) {}

  private seq(id: number): FakeSeq {
    const s = this.seqs.get(id)
    if (!s) throw new Error(`sequence ${id} does not exist`)
    return s
  }

  private add(p: Piece): number {
    const id = this.nextId++
    this.pieces.set(id, p)
    return id
  }

  saveRows(seq: number, start: number, n: number): number {
    const s = this.seq(seq)
    if (start < 0 || n < 1 || start + n > s.tokens.length) throw new Error(`rows [${start}, ${start + n}) are not computed (${s.tokens.length})`)
    return this.add({kind: 'rows', tokens: s.tokens.slice(start, start + n)})
  }

  saveState(seq: number, length: number): number {
    const s = this.seq(seq)
    if (length !== s.tokens.length && !s.kept.has(length)) throw new Error(`no state kept at ${length} (length ${s.tokens.length})`)
    return this.add({kind: 'state', tokens: s.tokens.slice(0, length)})
  }

  restore(seq: number, rows: number[], state: number): boolean {
    const s = this.seq(seq)
    if (s.tokens.length !== 0) throw new Error('restore into a sequence that has computed tokens')
    const st = this.pieces.get(state)
    if (!st || st.kind !== 'state') throw new Error(`piece ${state} is not a saved state`)
    const kv: number[] = []
    for (const id of rows) {
      const p = this.pieces.get(id)
      if (!p || p.kind !== 'rows') throw new Error(`piece ${id} is not saved rows`)
      kv.push(...p.tokens)
    }
    if (kv.length !== st.tokens.length || kv.some((t, i) => t !== st.tokens[i])) throw new Error('the rows and the state are not the same prefix')
    s.tokens = kv
    this.restores++
    return true
  }

  freeSaved(id: number): void {
    if (!this.pieces.delete(id)) throw new Error(`piece ${id} freed twice or never saved`)
  }

  exportSaved(id: number): SavedPiece {
    if (this.failExports) throw new Error('export failed')
    const p = this.pieces.get(id)
    if (!p) throw new Error(`piece ${id} is not saved`)
    const data = Float32Array.from(p.tokens)
    return p.kind === 'rows'
      ? {kind: 'rows', n: p.tokens.length, draft: false, data}
      : {kind: 'state', length: p.tokens.length, draft: false, windowLength: 0, data, window: new Float32Array(0)}
  }

  importSaved(piece: SavedPiece): number {
    if (this.refuseImports) throw new Error('the model refuses this piece')
    const tokens = Array.from(piece.data, Math.round)
    if (piece.kind === 'rows' ? tokens.length !== piece.n : tokens.length !== piece.length) throw new Error('a piece of another shape')
    return this.add({kind: piece.kind, tokens})
  }
}

export interface FakeOptions {
  vocabSize?: number
  contextLength?: number
  /** With a state store (the prefix cache can run). */
  store?: boolean
  /** With a draft of this block length (anchor + B − 1 drafts); it proposes the model's own greedy tokens... */
  draftBlock?: number
  /** ...except every this-many-th proposal, which it gets wrong (0: never). */
  draftWrongEvery?: number
  /**
   * Tokens of state the backend can hold: createSequence reserves maxLength of them and throws out_of_memory
   * when the live sequences' reservations leave too few (as a device backend does; unlimited when absent).
   */
  memoryTokens?: number
}

export class FakeStepModel implements StepModel {
  readonly vocabSize: number
  readonly contextLength: number
  readonly backend = 'cpu'
  readonly store: FakeStore | undefined
  /** Every step's items, in order. */
  readonly steps: StepItem[][] = []
  /** The next step throws this. */
  failNext: Error | undefined
  /** A step for which this returns an error throws it. */
  failWhen: ((items: StepItem[]) => Error | undefined) | undefined
  /** A step waits for this before it computes (a test acts while the step is in flight). */
  gate: Promise<void> | undefined
  created = 0
  /** See FakeOptions.memoryTokens. */
  memoryTokens: number | undefined
  /** Draft passes and rollbacks so far. */
  draftPasses = 0
  truncations = 0
  readonly draftBlockSize: number | undefined
  readonly draft: StepModel['draft']
  readonly truncate: StepModel['truncate']
  private readonly seqs = new Map<number, FakeSeq>()
  private nextSeq = 1
  private proposals = 0

  constructor(o: FakeOptions = {}) {
    this.vocabSize = o.vocabSize ?? 64
    this.contextLength = o.contextLength ?? 512
    this.store = o.store ? new FakeStore(this.seqs) : undefined
    this.draftBlockSize = o.draftBlock
    this.memoryTokens = o.memoryTokens
    const wrongEvery = o.draftWrongEvery ?? 0
    this.draft = o.draftBlock
      ? async (reqs: DraftRequest[]) => {
          await new Promise(r => setImmediate(r))
          this.draftPasses++
          return reqs.map(req => {
            const s = this.seqs.get(req.seq)
            if (!s) throw new Error(`draft on sequence ${req.seq}, which does not exist`)
            const ctx = [...s.tokens, req.token]
            const out: SampledToken[] = []
            for (let i = 0; i < req.n; i++) {
              let tok = nextToken(ctx, this.vocabSize)
              if (wrongEvery > 0 && ++this.proposals % wrongEvery === 0) tok = (tok + 1) % this.vocabSize
              out.push({token: tok})
              ctx.push(tok)
            }
            return {logits: null, sampled: req.sample ? out : null}
          })
        }
      : undefined
    this.truncate = o.draftBlock
      ? (seq: number, length: number) => {
          const s = this.seqs.get(seq)
          if (!s || length > s.tokens.length) throw new Error(`cannot truncate sequence ${seq} to ${length}`)
          s.tokens.length = length
          this.truncations++
        }
      : undefined
  }

  /** Tokens the live sequences reserved (their maxLength), against memoryTokens. */
  get reservedTokens(): number {
    let n = 0
    for (const s of this.seqs.values()) n += s.maxLength
    return n
  }

  /** Sequences alive now (a leak check). */
  get live(): number {
    return this.seqs.size
  }

  /** The tokens a live sequence has computed. */
  tokensOf(seq: number): number[] {
    return [...(this.seqs.get(seq)?.tokens ?? [])]
  }

  createSequence(maxLength: number): number {
    if (maxLength < 1 || maxLength > this.contextLength) throw new Error(`maxLength ${maxLength} outside the context`)
    if (this.memoryTokens !== undefined && this.reservedTokens + maxLength > this.memoryTokens) {
      throw new SplashError('out_of_memory', 'unavailable', `cannot allocate sequence state for ${maxLength} tokens`)
    }
    const id = this.nextSeq++
    this.seqs.set(id, {tokens: [], maxLength, kept: new Set()})
    this.created++
    return id
  }

  freeSequence(seq: number): void {
    if (!this.seqs.delete(seq)) throw new Error(`sequence ${seq} freed twice or never created`)
  }

  async step(items: StepItem[]): Promise<StepResult[]> {
    this.steps.push(items)
    // a native step completes on another thread: the event loop runs (timers, aborts) before its result is back
    await new Promise(r => setImmediate(r))
    if (this.gate) await this.gate
    const fail = this.failNext ?? this.failWhen?.(items)
    this.failNext = undefined
    if (fail) throw fail
    const seen = new Set<number>()
    return items.map(item => {
      if (seen.has(item.seq)) throw new Error(`sequence ${item.seq} twice in one step`)
      seen.add(item.seq)
      const s = this.seqs.get(item.seq)
      if (!s) throw new Error(`step on sequence ${item.seq}, which does not exist`)
      const start = s.tokens.length
      s.tokens.push(...item.tokens)
      if (s.tokens.length > s.maxLength) throw new Error(`sequence ${item.seq} past its maxLength`)
      s.kept = new Set((item.snapshots ?? []).filter(l => l > start && l < s.tokens.length))
      return {logits: null, sampled: item.sample ? this.sample(s.tokens, item.sample) : null}
    })
  }

  resample(seq: number, _row: number, sample: SampleRequest): SampledToken {
    return this.sample(this.seqs.get(seq)?.tokens ?? [], sample)[0]!
  }

  private sample(tokens: number[], req: SampleRequest): SampledToken[] {
    const k = req.rows.length
    return req.rows.map((row: SampleRow, r) => {
      const prefix = tokens.slice(0, tokens.length - k + r + 1)
      const token = row.token ?? nextToken(prefix, this.vocabSize, req.params.temperature > 0 ? row.uniform : undefined)
      return req.logprobs === undefined ? {token} : {token, logprob: -1, top: []}
    })
  }
}
