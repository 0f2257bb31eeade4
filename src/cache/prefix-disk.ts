// The prefix cache's disk tier (docs/prefix-cache.md). Snapshots the memory tier evicts, and every one it
// holds when the server stops, are written under one folder per model signature: a file per KV block, named by the
// block's key (the hash chain over every token up to its end, so a block is written once and shared by every
// snapshot that holds it), and a file per snapshot (its blocks' keys, its partial tail and its GDN/conv state). A
// request whose prompt extends a snapshot on disk, in this process or after a restart, has it read back into the
// memory tier before it is admitted. The folder is kept under a byte budget, least recently used snapshot first.
// Anything unreadable, torn or of another shape is a miss and is deleted; the disk tier never fails a request.
import {closeSync, mkdirSync, openSync, readdirSync, readSync, statSync, unlinkSync} from 'node:fs'
import {access, open, rename, unlink, utimes, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import type {SavedPiece} from './state-store.js'

const MAGIC = 'SPLASHP1'
const QUEUE_BYTES = 256 * 1024 ** 2
/** Files read at once when a snapshot is read back (libuv's thread pool has 4 threads by default). */
const READERS = 4
/** The files' format: part of the folder's signature, so a new format starts a new folder. */
export const PREFIX_DISK_FORMAT = MAGIC

/** A snapshot as the memory tier hands it over: its blocks (key, tokens, exporter) in order, tail and state. */
export interface SnapshotOut {
  length: number
  /** Bytes its pieces take at most (checked before anything is exported). */
  bytes: number
  blocks: Array<{key: string; tokens: Int32Array; rows: () => SavedPiece}>
  tail: {tokens: Int32Array; rows: () => SavedPiece} | undefined
  state: () => SavedPiece
}

/** A snapshot read back: the pieces to import, blocks already in memory named by key only. */
export interface SnapshotIn {
  length: number
  blocks: Array<{key: string; tokens: Int32Array; rows: SavedPiece | undefined}>
  tail: {tokens: Int32Array; rows: SavedPiece} | undefined
  state: SavedPiece
}

interface Entry {
  file: string
  length: number
  blocks: string[]
  tail: Int32Array
  bytes: number
  lastUsed: number
}

interface Header {
  kind: 'block' | 'snapshot'
  key?: string
  length?: number
  blocks?: string[]
  tail?: number[]
  /** Tokens stored after the header (a block's own). */
  tokens?: number
  pieces: PieceHeader[]
}

type PieceHeader =
  | {kind: 'rows'; n: number; draft: boolean; floats: number}
  | {kind: 'state'; length: number; draft: boolean; windowLength: number; floats: number; windowFloats: number}

export interface PrefixDiskStats {
  snapshots: number
  blocks: number
  bytes: number
  capacityBytes: number
  loads: number
}

export class PrefixDisk {
  private readonly entries = new Map<string, Entry[]>()
  /** Block key → snapshots on disk that hold it. */
  private readonly blockRefs = new Map<string, number>()
  private readonly blockBytes = new Map<string, number>()
  private bytes = 0
  private clock = 0
  private loads = 0
  private pending: Promise<void> = Promise.resolve()
  /** Bytes exported and not yet written. */
  private queued = 0

  constructor(
    readonly dir: string,
    /** The most bytes the folder may hold. */
    readonly capacityBytes: number,
  ) {
    mkdirSync(join(dir, 'blocks'), {recursive: true})
    mkdirSync(join(dir, 'snapshots'), {recursive: true})
    this.index()
  }

  /** The longest snapshot on disk that is a prefix of `tokens`, no longer than maxLength, longer than `than`. */
  find(chain: readonly string[], tokens: Int32Array, blockSize: number, maxLength: number, than: number): Entry | undefined {
    let best: Entry | undefined
    for (let j = 0; j <= chain.length; j++) {
      for (const e of this.entries.get(j === 0 ? '' : chain[j - 1]!) ?? []) {
        if (e.length > maxLength || e.length <= than || (best && best.length >= e.length) || e.blocks.length !== j) continue
        if (sameTokens(e.tail, tokens, j * blockSize)) best = e
      }
    }
    return best
  }

  /**
   * Reads a snapshot back (blocks in `inMemory` are not read); undefined when its files are gone or damaged. The files
   * are read READERS at a time (the thread pool's reads overlap), and their pieces are views of the file buffers.
   */
  async load(e: Entry, tokens: Int32Array, blockSize: number, inMemory: (key: string) => boolean): Promise<SnapshotIn | undefined> {
    await this.pending // its files may still be on their way
    try {
      const wanted = e.blocks.map((key, j) => ({key, j, held: inMemory(key)}))
      const toRead = wanted.filter(b => !b.held)
      const files = await readAll([join(this.dir, 'snapshots', e.file), ...toRead.map(b => join(this.dir, 'blocks', `${b.key}.kv`))])
      const snap = decode(files[0]!)
      if (snap.header.kind !== 'snapshot' || snap.pieces.length !== (e.tail.length > 0 ? 2 : 1)) throw new Error('not a snapshot')
      const read = new Map(toRead.map((b, i) => [b.key, files[i + 1]!]))
      const blocks: SnapshotIn['blocks'] = []
      for (const {key, j, held} of wanted) {
        const want = tokens.subarray(j * blockSize, (j + 1) * blockSize)
        if (held) {
          blocks.push({key, tokens: want.slice(), rows: undefined})
          continue
        }
        const b = decode(read.get(key)!)
        if (b.header.kind !== 'block' || b.header.key !== key || b.ints.length !== want.length || !sameTokens(b.ints, want, 0) || b.pieces.length !== 1) throw new Error('not its block')
        blocks.push({key, tokens: b.ints, rows: b.pieces[0]})
      }
      this.loads++
      e.lastUsed = ++this.clock
      const now = new Date()
      void utimes(join(this.dir, 'snapshots', e.file), now, now).catch(() => undefined) // the order the next start reads
      const tail = e.tail.length > 0 ? {tokens: e.tail, rows: snap.pieces[0]!} : undefined
      return {length: e.length, blocks, tail, state: snap.pieces[snap.pieces.length - 1]!}
    } catch {
      this.remove(e)
      return undefined
    }
  }

  /**
   * Writes a snapshot (the pieces are exported now, the files written in the background): blocks not yet on disk,
   * then the snapshot file. A snapshot already on disk is only marked used.
   */
  keep(s: SnapshotOut): void {
    // one snapshot may not take most of the budget, and writes that fall behind hold at most QUEUE_BYTES of
    // exported pieces in memory (or one snapshot)
    if (s.bytes > this.capacityBytes / 2 || (this.queued > 0 && this.queued + s.bytes > QUEUE_BYTES)) return
    const keys = s.blocks.map(b => b.key)
    const at = atOf(keys)
    const file = `${at || 'root'}-${s.length}-${tailHash(s.tail?.tokens)}.snap`
    const same = (this.entries.get(at) ?? []).find(e => e.file === file)
    if (same) {
      same.lastUsed = ++this.clock
      return
    }
    const writes: Array<[string, Encoded]> = []
    let bytes = 0
    for (const b of s.blocks) {
      if (this.blockRefs.has(b.key) || writes.some(w => w[0] === b.key)) continue
      const buf = encode({kind: 'block', key: b.key}, b.tokens, [b.rows()])
      writes.push([b.key, buf])
      bytes += buf.length
    }
    const pieces = s.tail ? [s.tail.rows(), s.state()] : [s.state()]
    const snapBuf = encode({kind: 'snapshot', length: s.length, blocks: keys, tail: [...(s.tail?.tokens ?? [])]}, new Int32Array(0), pieces)
    bytes += snapBuf.length
    const entry: Entry = {file, length: s.length, blocks: keys, tail: s.tail?.tokens.slice() ?? new Int32Array(0), bytes: snapBuf.length, lastUsed: ++this.clock}
    this.add(entry)
    for (const [key, buf] of writes) this.blockBytes.set(key, buf.length), (this.bytes += buf.length)
    this.shrink(entry)
    this.queued += bytes
    this.pending = this.pending.then(async () => {
      try {
        for (const [key, buf] of writes) await atomicWrite(join(this.dir, 'blocks', `${key}.kv`), buf)
        // a block another snapshot was writing may have failed: this one is written only over blocks on disk
        for (const key of keys) await access(join(this.dir, 'blocks', `${key}.kv`))
        await atomicWrite(join(this.dir, 'snapshots', file), snapBuf)
      } catch {
        this.remove(entry) // a full disk or a removed folder: the snapshot is not kept
      } finally {
        this.queued -= bytes
      }
    })
  }

  /** Forgets a snapshot its model cannot take back, and deletes its files. */
  forget(e: Entry): void {
    this.remove(e)
  }

  /** Resolves when every write started so far has finished. */
  async flush(): Promise<void> {
    await this.pending
  }

  stats(): PrefixDiskStats {
    let snapshots = 0
    for (const list of this.entries.values()) snapshots += list.length
    return {snapshots, blocks: this.blockRefs.size, bytes: this.bytes, capacityBytes: this.capacityBytes, loads: this.loads}
  }

  /** Reads the snapshot files' headers; drops files it cannot read and blocks no snapshot needs. */
  private index(): void {
    const found: Entry[] = []
    for (const f of readdirSync(join(this.dir, 'snapshots'))) {
      const path = join(this.dir, 'snapshots', f)
      try {
        if (!f.endsWith('.snap')) throw new Error('not a snapshot') // e.g. a write cut short
        const h = readHeader(path)
        if (h.kind !== 'snapshot' || typeof h.length !== 'number' || !Array.isArray(h.blocks) || !Array.isArray(h.tail)) throw new Error('bad header')
        const st = statSync(path)
        found.push({file: f, length: h.length, blocks: h.blocks, tail: Int32Array.from(h.tail), bytes: st.size, lastUsed: st.mtimeMs})
      } catch {
        quietUnlink(path)
      }
    }
    found.sort((a, b) => a.lastUsed - b.lastUsed)
    for (const e of found) {
      e.lastUsed = ++this.clock
      this.add(e)
    }
    for (const f of readdirSync(join(this.dir, 'blocks'))) {
      const key = f.endsWith('.kv') ? f.slice(0, -3) : ''
      const path = join(this.dir, 'blocks', f)
      if (!this.blockRefs.has(key)) {
        quietUnlink(path)
        continue
      }
      const size = statSync(path).size
      this.blockBytes.set(key, size)
      this.bytes += size
    }
    // a snapshot whose blocks are not all there cannot be loaded
    for (const list of [...this.entries.values()]) for (const e of [...list]) if (e.blocks.some(k => !this.blockBytes.has(k))) this.remove(e)
    this.shrink(undefined)
  }

  private add(e: Entry): void {
    const list = this.entries.get(atOf(e.blocks))
    if (list) list.push(e)
    else this.entries.set(atOf(e.blocks), [e])
    for (const k of e.blocks) this.blockRefs.set(k, (this.blockRefs.get(k) ?? 0) + 1)
    this.bytes += e.bytes
  }

  /** Forgets a snapshot and deletes its file, and the files of blocks no other snapshot holds. */
  private remove(e: Entry): void {
    const at = atOf(e.blocks)
    const list = this.entries.get(at)
    const i = list?.indexOf(e) ?? -1
    if (i < 0) return
    list!.splice(i, 1)
    if (list!.length === 0) this.entries.delete(at)
    this.bytes -= e.bytes
    const gone: string[] = []
    for (const k of e.blocks) {
      const refs = (this.blockRefs.get(k) ?? 1) - 1
      if (refs > 0) {
        this.blockRefs.set(k, refs)
        continue
      }
      this.blockRefs.delete(k)
      this.bytes -= this.blockBytes.get(k) ?? 0
      this.blockBytes.delete(k)
      gone.push(join(this.dir, 'blocks', `${k}.kv`))
    }
    const snap = join(this.dir, 'snapshots', e.file)
    // after the writes in flight, which may still be making these files
    this.pending = this.pending.then(async () => {
      for (const p of [snap, ...gone]) await unlink(p).catch(() => undefined)
    })
  }

  /** Deletes least recently used snapshots (never `keep`) until the folder fits its budget. */
  private shrink(keep: Entry | undefined): void {
    while (this.bytes > this.capacityBytes) {
      let victim: Entry | undefined
      for (const list of this.entries.values()) for (const e of list) if (e !== keep && (!victim || e.lastUsed < victim.lastUsed)) victim = e
      if (!victim) return
      this.remove(victim)
    }
  }
}

// ---- files: MAGIC, u32 header length, JSON header (padded to 4 bytes), the tokens (i32), then each piece's floats
/** A file's parts in order (the pieces as views of their arrays, not copied into one buffer) and its length. */
interface Encoded {
  parts: Buffer[]
  length: number
}

function encode(h: Omit<Header, 'pieces'>, tokens: Int32Array, pieces: SavedPiece[]): Encoded {
  const header: Header = {
    ...h,
    tokens: tokens.length,
    pieces: pieces.map(p =>
      p.kind === 'rows'
        ? {kind: 'rows', n: p.n, draft: p.draft, floats: p.data.length}
        : {kind: 'state', length: p.length, draft: p.draft, windowLength: p.windowLength, floats: p.data.length, windowFloats: p.window.length},
    ),
  }
  let json = Buffer.from(JSON.stringify(header))
  if (json.length % 4) json = Buffer.concat([json, Buffer.alloc(4 - (json.length % 4), 0x20)])
  const parts: Buffer[] = [Buffer.from(MAGIC), u32(json.length), json, bytesOf(tokens)]
  for (const p of pieces) {
    parts.push(bytesOf(p.data))
    if (p.kind === 'state') parts.push(bytesOf(p.window))
  }
  return {parts, length: parts.reduce((n, b) => n + b.length, 0)}
}

function decode(buf: Buffer): {header: Header; ints: Int32Array; pieces: SavedPiece[]} {
  if (buf.length < 12 || buf.toString('latin1', 0, 8) !== MAGIC) throw new Error('not a prefix-cache file')
  const hl = buf.readUInt32LE(8)
  const header = JSON.parse(buf.toString('utf8', 12, 12 + hl)) as Header
  let at = 12 + hl
  // the pieces are views of the file's buffer (readAll's buffers start an ArrayBuffer, and a written header is
  // padded to 4 bytes); they live until imported
  const take = (n: number): number => {
    if (!Number.isSafeInteger(n) || n < 0 || at + n * 4 > buf.length || (buf.byteOffset + at) % 4 !== 0) throw new Error('truncated or misaligned')
    at += n * 4
    return buf.byteOffset + at - n * 4
  }
  const floats = (n: number) => new Float32Array(buf.buffer, take(n), n)
  // a copy: a block's tokens stay in the memory tier, which must not keep the whole file's buffer alive
  const tokens = header.tokens ?? 0
  const ints = new Int32Array(buf.buffer, take(tokens), tokens).slice()
  const pieces: SavedPiece[] = header.pieces.map(p =>
    p.kind === 'rows'
      ? {kind: 'rows', n: p.n, draft: p.draft, data: floats(p.floats)}
      : {kind: 'state', length: p.length, draft: p.draft, windowLength: p.windowLength, data: floats(p.floats), window: floats(p.windowFloats)},
  )
  if (at !== buf.length) throw new Error('trailing bytes')
  return {header, ints, pieces}
}

/** Reads whole files, READERS at a time, each into a buffer of its own (offset 0); rejects if any cannot be read. */
async function readAll(paths: readonly string[]): Promise<Buffer[]> {
  const out: Buffer[] = new Array(paths.length)
  let next = 0
  const worker = async () => {
    while (next < paths.length) {
      const i = next++
      const fh = await open(paths[i]!, 'r')
      try {
        const size = (await fh.stat()).size
        const buf = Buffer.allocUnsafeSlow(size) // not pooled: its own ArrayBuffer, at offset 0; every byte read below
        for (let at = 0; at < size; ) {
          const {bytesRead} = await fh.read(buf, at, size - at, at)
          if (bytesRead === 0) throw new Error('truncated')
          at += bytesRead
        }
        out[i] = buf
      } finally {
        await fh.close()
      }
    }
  }
  await Promise.all(Array.from({length: Math.min(READERS, paths.length)}, worker))
  return out
}

function readHeader(path: string): Header {
  const fd = openSync(path, 'r')
  try {
    const head = Buffer.alloc(12)
    if (readSync(fd, head, 0, 12, 0) !== 12 || head.toString('latin1', 0, 8) !== MAGIC) throw new Error('not a prefix-cache file')
    const hl = head.readUInt32LE(8)
    if (hl > 1 << 24) throw new Error('header too large')
    const json = Buffer.alloc(hl)
    if (readSync(fd, json, 0, hl, 12) !== hl) throw new Error('truncated')
    return JSON.parse(json.toString('utf8')) as Header
  } finally {
    closeSync(fd)
  }
}

async function atomicWrite(path: string, file: Encoded): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`
  await writeFile(tmp, file.parts)
  await rename(tmp, path)
}

function quietUnlink(path: string): void {
  try {
    unlinkSync(path)
  } catch {
    // already gone
  }
}

const u32 = (n: number) => {
  const b = Buffer.alloc(4)
  b.writeUInt32LE(n)
  return b
}
const bytesOf = (a: Float32Array | Int32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)

/** The key snapshots are found by: their last full block's ('' = none). */
const atOf = (blocks: readonly string[]) => blocks[blocks.length - 1] ?? ''

function tailHash(t: Int32Array | undefined): string {
  let h = 0x811c9dc5
  for (const x of t ?? []) h = Math.imul(h ^ x, 0x01000193)
  return (h >>> 0).toString(36)
}

/** Whether `saved` stands in `tokens` at `offset`. */
export function sameTokens(saved: Int32Array, tokens: Int32Array, offset: number): boolean {
  if (offset + saved.length > tokens.length) return false
  for (let i = 0; i < saved.length; i++) if (saved[i] !== tokens[offset + i]) return false
  return true
}
