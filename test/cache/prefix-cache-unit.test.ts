// The prefix cache's decisions on a fake step model (test/helpers/fake-step-model.ts, no native engine): hits and
// misses, shared blocks, least-recently-used eviction inside the byte budget, reuse through the engine (a hit gives
// the miss's output), and the disk tier's failures (a damaged file, a piece the model refuses, an export that
// throws, an unwritable folder), each of which must only cost a miss.
import t, {type Test} from 'tap'
import {mkdtempSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {PrefixCache} from '../../src/cache/prefix-cache.js'
import {PrefixDisk} from '../../src/cache/prefix-disk.js'
import {Engine} from '../../src/engine/engine.js'
import {samplingParams} from '../../src/engine/sampling.js'
import type {GenerationEvent, GenerationRequest, Usage} from '../../src/engine/request.js'
import {FakeStepModel, type FakeStore} from '../helpers/fake-step-model.js'

const B = 16
const tokens = (n: number, seed = 1) => Int32Array.from({length: n}, (_, i) => (i * 11 + seed * 17) % 60)

/** A fake sequence that has computed `toks`. */
async function computed(m: FakeStepModel, toks: Int32Array): Promise<number> {
  const seq = m.createSequence(512)
  await m.step([{seq, tokens: toks, logits: 'none'}])
  return seq
}

function cacheOn(m: FakeStepModel, capacityBytes: number, disk?: PrefixDisk): PrefixCache {
  const store = m.store!
  return new PrefixCache(store, {blockSize: B, capacityBytes, rowBytes: store.rowBytes, stateBytes: store.stateBytes, ...(disk ? {disk} : {})})
}

t.test('a saved prefix is found for a longer prompt, restored exactly, and missed for another one', async t => {
  const m = new FakeStepModel({store: true})
  const c = cacheOn(m, 1 << 20)
  const a = tokens(40)
  const seq = await computed(m, a)
  c.save(seq, a)
  const longer = Int32Array.from([...a, 5, 6, 7])
  const hit = c.lookup(longer)
  t.ok(hit, 'a hit')
  t.equal(hit!.length, 40, 'the whole saved prefix')
  t.equal(hit!.rows.length, 3, 'two full blocks and the tail')
  const fresh = m.createSequence(512)
  t.ok(m.store!.restore(fresh, hit!.rows, hit!.state), 'the rows and the state restore (the fake checks they agree)')
  t.same(m.tokensOf(fresh), [...a], 'the restored sequence holds the prefix')
  t.equal(c.lookup(longer, 39), undefined, 'no snapshot within a shorter maxLength')
  const other = Int32Array.from(a)
  other[20] = 59
  t.equal(c.lookup(other), undefined, 'a prompt that differs inside the second block misses')
  const s = c.stats()
  t.same([s.hits, s.misses, s.reusedTokens, s.snapshots, s.blocks], [1, 2, 40, 1, 2])
})

t.test('snapshots that share a prefix share its blocks, counted once', async t => {
  const m = new FakeStepModel({store: true})
  const c = cacheOn(m, 1 << 20)
  const a = tokens(40)
  const b = Int32Array.from([...a.subarray(0, 32), 1, 2, 3, 4, 5])
  c.save(await computed(m, a), a)
  c.save(await computed(m, b), b)
  const s = c.stats()
  t.equal(s.snapshots, 2)
  t.equal(s.blocks, 2, 'the two full blocks are held once')
  t.equal(s.bytes, 2 * B * 4 + (8 + 5) * 4 + 2 * 16, 'bytes: shared blocks once, each tail and state')
  t.equal(c.lookup(Int32Array.from([...b, 9]))!.length, 37, 'each snapshot is found for its own prompt')
  t.equal(c.lookup(Int32Array.from([...a, 9]))!.length, 40)
  c.save(await computed(m, a), a)
  t.equal(c.stats().snapshots, 2, 'saving the same prefix again keeps one snapshot')
})

t.test('the least recently used snapshot is evicted to stay in the budget, and its pieces are freed', async t => {
  const m = new FakeStepModel({store: true})
  const one = 2 * B * 4 + 8 * 4 + 16 // a 40-token snapshot with blocks of its own
  const c = cacheOn(m, 2 * one + 10)
  const [p1, p2, p3] = [tokens(40, 1), tokens(40, 2), tokens(40, 3)]
  c.save(await computed(m, p1), p1)
  c.save(await computed(m, p2), p2)
  t.ok(c.lookup(Int32Array.from([...p1, 0])), 'p1 used again: now the most recent')
  c.save(await computed(m, p3), p3)
  t.equal(c.stats().evictions, 1, 'one eviction')
  t.ok(c.stats().bytes <= 2 * one + 10, 'within the budget')
  t.equal(c.lookup(Int32Array.from([...p2, 0])), undefined, 'p2, the least recently used, is gone')
  t.ok(c.lookup(Int32Array.from([...p1, 0])), 'p1 stays')
  t.ok(c.lookup(Int32Array.from([...p3, 0])), 'p3 stays')
  const store = m.store as FakeStore
  t.equal(store.pieces.size, 2 * 4, 'the store holds exactly the two snapshots’ pieces (2 blocks, tail, state each)')
  c.clear()
  t.equal(store.pieces.size, 0, 'clear frees every piece')
  t.equal(c.stats().bytes, 0)
})

interface Outcome {
  tokens: number[]
  usage?: Usage
}

function run(e: Engine, req: GenerationRequest): Promise<Outcome> {
  const o: Outcome = {tokens: []}
  return new Promise((resolve, reject) =>
    e.submit(req, (ev: GenerationEvent) => {
      if (ev.type === 'token') o.tokens.push(ev.token)
      else if (ev.type === 'done') resolve({...o, usage: ev.usage})
      else if (ev.type === 'error') reject(ev.error)
    }),
  )
}

const req = (prompt: Int32Array, maxTokens: number, seed?: number): GenerationRequest => ({
  prompt,
  maxTokens,
  sampling: samplingParams(seed === undefined ? {temperature: 0} : {temperature: 0.9, seed}),
  stopTokenIds: [],
})

t.test('through the engine: a repeated prompt and the next turn of a conversation reuse the cache, with the miss’s output', async t => {
  for (const seed of [undefined, 42]) {
    const label = seed === undefined ? 'greedy' : 'seeded'
    const plain = new Engine(new FakeStepModel({store: true}))
    const m = new FakeStepModel({store: true})
    const cached = new Engine(m, {tokenBudget: 16}, undefined, {cacheBytes: 1 << 20})
    const p = tokens(50)
    const miss = await run(cached, req(p, 8, seed))
    t.equal(miss.usage?.cachedTokens, 0, `${label}: the first request computes its prompt`)
    const again = await run(cached, req(p, 8, seed))
    t.equal(again.usage?.cachedTokens, 49, `${label}: the replay computes only the prompt's last token`)
    t.same(again.tokens, miss.tokens, `${label}: same output as the miss`)
    const turn2 = Int32Array.from([...p, ...miss.tokens, 3, 4, 5])
    const next = await run(cached, req(turn2, 6, seed))
    t.ok(next.usage!.cachedTokens >= p.length + miss.tokens.length - 1, `${label}: the next turn reuses prompt and answer (${next.usage!.cachedTokens})`)
    t.same(next.tokens, (await run(plain, req(turn2, 6, seed))).tokens, `${label}: the next turn's output is the uncached one`)
    await cached.idle()
    t.equal(m.live, 0, `${label}: no sequence left`)
  }
})

function diskDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'splash-prefix-unit-'))
  t.teardown(() => rmSync(dir, {recursive: true, force: true}))
  return dir
}

/** A cache with room for one 40-token snapshot, over a disk tier in `dir`: saving a second evicts the first to disk. */
async function evictedToDisk(t: Test, dir: string) {
  const m = new FakeStepModel({store: true})
  const disk = new PrefixDisk(dir, 1 << 20)
  const one = 2 * B * 4 + 8 * 4 + 16
  const c = cacheOn(m, one + 10, disk)
  const [p1, p2] = [tokens(40, 1), tokens(40, 2)]
  c.save(await computed(m, p1), p1)
  c.save(await computed(m, p2), p2)
  await disk.flush()
  t.equal(disk.stats().snapshots, 1, 'the evicted snapshot is on disk')
  const want = Int32Array.from([...p1, 7, 7])
  t.equal(c.lookup(want), undefined, 'and no longer in memory')
  return {m, disk, c, want}
}

t.test('the disk tier reads an evicted snapshot back; a new cache on the same folder finds it after a restart', async t => {
  const dir = diskDir(t)
  const {m, c, want} = await evictedToDisk(t, dir)
  await c.warm(want)
  const hit = c.lookup(want)
  t.equal(hit?.length, 40, 'read back into memory and found')
  const fresh = m.createSequence(512)
  m.store!.restore(fresh, hit!.rows, hit!.state)
  t.same(m.tokensOf(fresh), [...want.subarray(0, 40)], 'with the very tokens it saved')
  const m2 = new FakeStepModel({store: true})
  const c2 = cacheOn(m2, 1 << 20, new PrefixDisk(dir, 1 << 20))
  await c2.warm(want)
  t.equal(c2.lookup(want)?.length, 40, 'a restarted cache finds it on disk')
})

t.test('disk tier failures only cost a miss', async t => {
  t.test('a damaged snapshot file is a miss and is deleted', async t => {
    const dir = diskDir(t)
    const {c, disk, want} = await evictedToDisk(t, dir)
    const [snap] = readdirSync(join(dir, 'snapshots'))
    writeFileSync(join(dir, 'snapshots', snap!), 'SPLASHP1 torn')
    await c.warm(want)
    t.equal(c.lookup(want), undefined, 'a miss')
    await disk.flush()
    t.same(readdirSync(join(dir, 'snapshots')), [], 'the file is gone')
    t.equal(disk.stats().snapshots, 0, 'and forgotten')
  })
  t.test('a piece the model refuses is a miss, leaks nothing and is not read again', async t => {
    const dir = diskDir(t)
    const {m, c, disk, want} = await evictedToDisk(t, dir)
    const store = m.store as FakeStore
    const held = store.pieces.size
    store.refuseImports = true
    await c.warm(want)
    t.equal(c.lookup(want), undefined, 'a miss')
    t.equal(store.pieces.size, held, 'no piece kept from the refused snapshot')
    t.equal(disk.stats().snapshots, 0, 'forgotten by the disk tier')
    t.equal(c.warm(want), undefined, 'nothing left to read')
  })
  t.test('an export that throws keeps the snapshot off disk and the cache working', async t => {
    const dir = diskDir(t)
    const m = new FakeStepModel({store: true})
    const disk = new PrefixDisk(dir, 1 << 20)
    const one = 2 * B * 4 + 8 * 4 + 16
    const c = cacheOn(m, one + 10, disk)
    ;(m.store as FakeStore).failExports = true
    const [p1, p2] = [tokens(40, 1), tokens(40, 2)]
    c.save(await computed(m, p1), p1)
    c.save(await computed(m, p2), p2)
    await disk.flush()
    t.equal(disk.stats().snapshots, 0, 'nothing written')
    t.equal(c.stats().evictions, 1, 'the eviction still happened')
    t.equal(c.lookup(Int32Array.from([...p2, 1]))?.length, 40, 'the memory tier serves the other')
  })
  t.test('a folder that cannot be written loses the snapshot, not the request', async t => {
    const dir = diskDir(t)
    const m = new FakeStepModel({store: true})
    const disk = new PrefixDisk(dir, 1 << 20)
    // the folders replaced by files: every write into them fails (ENOTDIR), whoever runs the test
    for (const sub of ['blocks', 'snapshots']) {
      rmSync(join(dir, sub), {recursive: true})
      writeFileSync(join(dir, sub), 'not a folder')
    }
    const e = new Engine(m, {tokenBudget: 16}, undefined, {cacheBytes: 2 * B * 4 + 8 * 4 + 16 + 10, disk})
    const first = await run(e, req(tokens(41, 1), 4))
    const second = await run(e, req(tokens(41, 2), 4))
    t.equal(first.tokens.length, 4, 'the requests are served')
    t.equal(second.tokens.length, 4)
    await e.idle()
    await disk.flush()
    t.equal(disk.stats().snapshots, 0, 'the failed writes are forgotten')
    t.equal(m.live, 0)
  })
  t.test('a snapshot whose shared block failed to write is not written over the missing block', async t => {
    const dir = diskDir(t)
    const disk = new PrefixDisk(dir, 1 << 20)
    rmSync(join(dir, 'blocks'), {recursive: true})
    writeFileSync(join(dir, 'blocks'), 'not a folder')
    const rows = (n: number) => () => ({kind: 'rows' as const, n, draft: false, data: new Float32Array(n)})
    const state = (length: number) => () => ({kind: 'state' as const, length, draft: false, windowLength: 0, data: new Float32Array(length), window: new Float32Array(0)})
    const block = {key: 'shared', tokens: tokens(B), rows: rows(B)}
    // both handed over before the first write runs: the second finds the block already taken by the first
    disk.keep({length: B + 2, bytes: 1000, blocks: [block], tail: {tokens: Int32Array.of(1, 2), rows: rows(2)}, state: state(B + 2)})
    disk.keep({length: B + 3, bytes: 1000, blocks: [block], tail: {tokens: Int32Array.of(1, 2, 3), rows: rows(3)}, state: state(B + 3)})
    await disk.flush()
    t.equal(disk.stats().snapshots, 0, 'neither snapshot is kept')
    t.same(readdirSync(join(dir, 'snapshots')), [], 'no snapshot file points at a block that is not there')
  })
})
