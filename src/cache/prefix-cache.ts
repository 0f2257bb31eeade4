// The prefix cache for hybrid models (docs/prefix-cache.md). Attention KV is kept in fixed blocks of
// `blockSize` positions, found by a hash chain over the prompt's tokens (a block's key covers every token
// before it) and shared, with reference counts, by every snapshot of a prefix that contains it. GDN and conv
// state cannot be cut, so a snapshot saves the whole state at one length (the end of a prompt, the end of a
// generation, anchors inside long prompts) plus the KV rows of its last partial block. A new request
// resumes from the longest snapshot whose tokens are a prefix of its prompt. Snapshots are evicted least
// recently used first so the cache stays inside its byte budget; a block goes when no snapshot needs it.
// The bytes themselves live in the native core (StateStore); this file only decides.
import type {StateStore} from './state-store.js'
import type {PrefixDisk, PrefixDiskStats, SnapshotIn, SnapshotOut} from './prefix-disk.js'
import {sameTokens} from './prefix-disk.js'

export interface PrefixCacheOptions {
  /** Positions per KV block. */
  blockSize?: number
  /** Most bytes the cache may hold (KV blocks, partial rows and states). */
  capacityBytes: number
  /** Bytes of one KV position (all attention layers, target and draft). */
  rowBytes: number
  /** Bytes of one saved GDN + conv state. */
  stateBytes: number
  /** The disk tier: evicted snapshots go there, and a prompt it holds a longer prefix of is read back (warm). */
  disk?: PrefixDisk
}

export interface CacheHit {
  /** Positions restored (the request resumes its prefill here). */
  length: number
  /** Saved row ids covering [0, length), in order, and the saved state at `length`. */
  rows: number[]
  state: number
}

export interface PrefixCacheStats {
  snapshots: number
  blocks: number
  bytes: number
  capacityBytes: number
  hits: number
  misses: number
  /** Prompt positions restored instead of computed, over all hits. */
  reusedTokens: number
  evictions: number
}

interface Block {
  key: string
  id: number
  tokens: Int32Array
  refs: number
  /** Chain hash after this block (the next block's hash starts here). */
  h1: number
  h2: number
}

interface Snapshot {
  /** Key of the last full block before the tail ('' = none). */
  at: string
  length: number
  blocks: Block[]
  tail: {id: number; tokens: Int32Array} | undefined
  state: number
  bytes: number
  lastUsed: number
}

const ROOT = ''
/** The hash chain's starting lanes (before the first block). */
const H1 = 0x811c9dc5
const H2 = 0x01000193

export class PrefixCache {
  readonly blockSize: number
  private readonly blocks = new Map<string, Block>()
  /** Snapshots by the key of their last full block. */
  private readonly snapshots = new Map<string, Snapshot[]>()
  /** Disk snapshots being read back, by their disk entry. */
  private readonly reading = new Map<object, Promise<void>>()
  private count = 0
  private bytes = 0
  private clock = 0
  private hits = 0
  private misses = 0
  private reused = 0
  private evictions = 0

  constructor(
    private readonly store: StateStore,
    private readonly options: PrefixCacheOptions,
  ) {
    this.blockSize = options.blockSize ?? 128
    if (!(this.blockSize >= 1)) throw new Error('blockSize must be at least 1')
  }

  /** The longest cached prefix of `tokens` no longer than `maxLength` (undefined: miss). */
  lookup(tokens: Int32Array, maxLength = tokens.length): CacheHit | undefined {
    const best = this.best(tokens, maxLength)
    if (!best) {
      this.misses++
      return undefined
    }
    best.lastUsed = ++this.clock
    this.hits++
    this.reused += best.length
    const rows = best.blocks.map(b => b.id)
    if (best.tail) rows.push(best.tail.id)
    return {length: best.length, rows, state: best.state}
  }

  /**
   * When the disk tier holds a longer prefix of `tokens` (up to maxLength) than memory does: reads it back into
   * memory, so that the lookup at admission finds it. Resolves when done (never rejects); undefined: nothing to read.
   */
  warm(tokens: Int32Array, maxLength = tokens.length): Promise<void> | undefined {
    const disk = this.options.disk
    if (!disk) return undefined
    const B = this.blockSize
    const chain: string[] = []
    let h1 = H1
    let h2 = H2
    for (let j = 0; (j + 1) * B <= maxLength; j++) {
      const next = chainKey(h1, h2, tokens, j * B, B)
      chain.push(next.key)
      h1 = next.h1
      h2 = next.h2
    }
    // a snapshot larger than the memory tier would be evicted again at once
    const fits = Math.floor((this.options.capacityBytes - this.options.stateBytes) / this.options.rowBytes)
    const entry = disk.find(chain, tokens, B, Math.min(maxLength, fits), this.best(tokens, maxLength)?.length ?? 0)
    if (!entry) return undefined
    // requests that share a prefix wait for one read of it
    let reading = this.reading.get(entry)
    if (!reading) {
      reading = disk
        .load(entry, tokens, B, key => this.blocks.has(key))
        .then(snap => {
          if (snap && !this.adopt(snap)) disk.forget(entry) // the model refused its pieces: not read again
        })
        .catch(() => undefined)
        .finally(() => this.reading.delete(entry))
      this.reading.set(entry, reading)
    }
    return reading
  }

  /**
   * Writes the snapshots held that the disk tier lacks, most recently used first up to half its budget (the server is
   * stopping, or idle); resolves when the files are written. `go`: asked before each snapshot, false stops.
   */
  async persist(go: () => boolean = () => true): Promise<void> {
    const disk = this.options.disk
    if (!disk) return
    // the most recently used that fit half the folder's budget, written oldest first (the folder's own order); a
    // block shared by several snapshots is one file, so it counts once (a prompt's snapshot and its answer's share
    // all but the answer's blocks)
    const all = [...this.snapshots.values()].flat().sort((a, b) => b.lastUsed - a.lastUsed)
    const chosen: Snapshot[] = []
    const counted = new Set<string>()
    let bytes = 0
    for (const s of all) {
      let adds = this.sizeOf(s)
      for (const b of s.blocks) if (counted.has(b.key)) adds -= this.blockSize * this.options.rowBytes
      if (bytes + adds > disk.capacityBytes / 2) break
      bytes += adds
      for (const b of s.blocks) counted.add(b.key)
      chosen.push(s)
    }
    for (const s of chosen.reverse()) {
      if (!go()) break
      if (!this.snapshots.get(s.at)?.includes(s)) continue // evicted meanwhile (and so written then)
      this.toDisk(s)
      await disk.flush() // one at a time: the exported pieces wait in memory only until written
    }
  }

  /** Bytes a snapshot's pieces take: its state and every row up to its length. */
  private sizeOf(s: {length: number}): number {
    return this.options.stateBytes + s.length * this.options.rowBytes
  }

  private best(tokens: Int32Array, maxLength: number): Snapshot | undefined {
    const B = this.blockSize
    let best: Snapshot | undefined
    let key = ROOT
    let h1 = H1
    let h2 = H2
    const path: Block[] = []
    for (let j = 0; ; j++) {
      for (const s of this.snapshots.get(key) ?? []) {
        if (s.length > maxLength || (best && best.length >= s.length)) continue
        if (!s.tail || sameTokens(s.tail.tokens, tokens, j * B)) best = s
      }
      if ((j + 1) * B > maxLength) break
      const next = chainKey(h1, h2, tokens, j * B, B)
      const block = this.blocks.get(next.key)
      if (!block || !sameTokens(block.tokens, tokens, j * B)) break
      path.push(block)
      key = next.key
      h1 = next.h1
      h2 = next.h2
    }
    return best
  }

  /**
   * Saves the state of native sequence `seq`, which has computed exactly `tokens`: new full blocks, the
   * partial tail and the GDN state. Blocks already cached for the same prefix are shared, not copied.
   */
  save(seq: number, tokens: Int32Array): void {
    const B = this.blockSize
    const length = tokens.length
    if (length === 0) return
    const full = Math.floor(length / B)
    // walk (and extend) the chain of full blocks
    const chain: Block[] = []
    const created: Block[] = []
    let key = ROOT
    let h1 = H1
    let h2 = H2
    try {
      for (let j = 0; j < full; j++) {
        const next = chainKey(h1, h2, tokens, j * B, B)
        let block = this.blocks.get(next.key)
        if (block && !sameTokens(block.tokens, tokens, j * B)) return // hash collision: do not cache this prefix
        if (!block) {
          block = {...next, id: this.store.saveRows(seq, j * B, B), tokens: tokens.slice(j * B, (j + 1) * B), refs: 0}
          this.blocks.set(block.key, block)
          this.bytes += B * this.options.rowBytes
          created.push(block)
        }
        chain.push(block)
        key = next.key
        h1 = next.h1
        h2 = next.h2
      }
      const tailTokens = tokens.subarray(full * B)
      const existing = (this.snapshots.get(key) ?? []).find(s => s.length === length && (!s.tail || sameTokens(s.tail.tokens, tokens, full * B)))
      if (existing) {
        existing.lastUsed = ++this.clock
        return
      }
      const tail = tailTokens.length > 0 ? {id: this.store.saveRows(seq, full * B, tailTokens.length), tokens: tailTokens.slice()} : undefined
      let state: number
      try {
        state = this.store.saveState(seq, length)
      } catch (err) {
        if (tail) this.store.freeSaved(tail.id)
        throw err
      }
      this.insert(key, length, chain, tail, state)
    } finally {
      // blocks made for a snapshot that was not kept (or kept, then evicted) go at once
      for (const b of created) if (b.refs === 0) this.dropBlock(b)
    }
  }

  /** Evicts least recently used snapshots until at most `bytes` are held. */
  shrink(bytes: number): void {
    while (this.bytes > bytes && this.count > 0) {
      let victim: Snapshot | undefined
      for (const list of this.snapshots.values()) for (const s of list) if (!victim || s.lastUsed < victim.lastUsed) victim = s
      this.evict(victim!)
    }
  }

  /** Frees everything. */
  clear(): void {
    this.shrink(0)
  }

  /** The disk tier's counts (undefined without one). */
  diskStats(): PrefixDiskStats | undefined {
    return this.options.disk?.stats()
  }

  stats(): PrefixCacheStats {
    return {
      snapshots: this.count,
      blocks: this.blocks.size,
      bytes: this.bytes,
      capacityBytes: this.options.capacityBytes,
      hits: this.hits,
      misses: this.misses,
      reusedTokens: this.reused,
      evictions: this.evictions,
    }
  }

  /** Holds a new snapshot (its blocks already held) and evicts down to the budget. */
  private insert(at: string, length: number, blocks: Block[], tail: Snapshot['tail'], state: number): void {
    const bytes = this.options.stateBytes + (tail ? tail.tokens.length * this.options.rowBytes : 0)
    const snap: Snapshot = {at, length, blocks, tail, state, bytes, lastUsed: ++this.clock}
    for (const b of blocks) b.refs++
    const list = this.snapshots.get(at)
    if (list) list.push(snap)
    else this.snapshots.set(at, [snap])
    this.count++
    this.bytes += bytes
    this.shrink(this.options.capacityBytes)
  }

  /**
   * Puts a snapshot read from disk into memory: its blocks shared with those held, the rest imported. False when the
   * model refused a piece (true also when it is moot: held already, or a block evicted meanwhile).
   */
  private adopt(snap: SnapshotIn): boolean {
    const store = this.store
    if (!store.importSaved) return false
    const B = this.blockSize
    const made: number[] = []
    const blocks: Block[] = []
    const fresh: Block[] = []
    try {
      let h1 = H1
      let h2 = H2
      for (const b of snap.blocks) {
        const next = chainKey(h1, h2, b.tokens, 0, B)
        h1 = next.h1
        h2 = next.h2
        if (next.key !== b.key) return false // not the chain it claims
        const held = this.blocks.get(b.key)
        if (held && sameTokens(held.tokens, b.tokens, 0)) {
          blocks.push(held)
          continue
        }
        if (held || !b.rows) return true // evicted meanwhile, or a collision: a miss this time
        const id = store.importSaved(b.rows)
        made.push(id)
        const block: Block = {...next, id, tokens: b.tokens, refs: 0}
        blocks.push(block)
        fresh.push(block)
      }
      const at = blocks.length > 0 ? blocks[blocks.length - 1]!.key : ROOT
      if ((this.snapshots.get(at) ?? []).some(s => s.length === snap.length && (!s.tail || !snap.tail || sameTokens(s.tail.tokens, snap.tail.tokens, 0)))) return true
      const tail = snap.tail ? {id: store.importSaved(snap.tail.rows), tokens: snap.tail.tokens} : undefined
      if (tail) made.push(tail.id)
      const state = store.importSaved(snap.state)
      made.push(state)
      made.length = 0 // kept from here on
      for (const b of fresh) {
        this.blocks.set(b.key, b)
        this.bytes += B * this.options.rowBytes
      }
      this.insert(at, snap.length, blocks, tail, state)
      return true
    } catch {
      return false // a piece the model refused: nothing of it is kept
    } finally {
      for (const id of made) store.freeSaved(id)
    }
  }

  /** Hands a snapshot to the disk tier (its pieces are exported now). A failure only means it is not kept there. */
  private toDisk(s: Snapshot): void {
    const disk = this.options.disk
    const store = this.store
    if (!disk || !store.exportSaved) return
    const exp = (id: number) => store.exportSaved!(id)
    const out: SnapshotOut = {
      length: s.length,
      bytes: this.sizeOf(s),
      blocks: s.blocks.map(b => ({key: b.key, tokens: b.tokens, rows: () => exp(b.id)})),
      tail: s.tail ? {tokens: s.tail.tokens, rows: () => exp(s.tail!.id)} : undefined,
      state: () => exp(s.state),
    }
    try {
      disk.keep(out)
    } catch {
      // not kept on disk
    }
  }

  private evict(s: Snapshot): void {
    this.toDisk(s)
    const list = this.snapshots.get(s.at)!
    list.splice(list.indexOf(s), 1)
    if (list.length === 0) this.snapshots.delete(s.at)
    this.count--
    this.evictions++
    this.bytes -= s.bytes
    this.store.freeSaved(s.state)
    if (s.tail) this.store.freeSaved(s.tail.id)
    for (const b of s.blocks) if (--b.refs === 0) this.dropBlock(b)
  }

  private dropBlock(b: Block): void {
    if (this.blocks.get(b.key) !== b) return
    this.blocks.delete(b.key)
    this.bytes -= this.blockSize * this.options.rowBytes
    this.store.freeSaved(b.id)
  }
}


/** The chain hash after one more block (two 32-bit FNV-style lanes; a hit is confirmed token by token). */
function chainKey(h1: number, h2: number, tokens: Int32Array, start: number, n: number): {key: string; h1: number; h2: number} {
  let a = h1
  let b = h2
  for (let i = start; i < start + n; i++) {
    const t = tokens[i]
    a = Math.imul(a ^ t, 0x01000193)
    b = Math.imul(b ^ (t + 0x9e3779b9), 0x85ebca6b) ^ (b >>> 13)
  }
  a >>>= 0
  b >>>= 0
  return {key: `${a.toString(36)}.${b.toString(36)}`, h1: a, h2: b}
}
