// The prefix cache's disk tier on the real engine: a saved piece exported and imported restores exactly what the
// original restores; a snapshot evicted from memory (or persisted at shutdown) is read back by a later request,
// in the same engine or a fresh model opened on the same folder, and gives the tokens a cold miss gives, with the
// reused tokens counted; blocks are written once and shared; damaged files and other models' pieces are misses,
// never errors; the folder stays inside its budget; nothing is left behind natively.
import t from 'tap'
import {mkdirSync, mkdtempSync, readdirSync, statSync, utimesSync, writeFileSync, readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {NativeModel} from '../../src/native/native-model.js'
import {Engine} from '../../src/engine/engine.js'
import {PrefixDisk} from '../../src/cache/prefix-disk.js'
import {trimOtherFolders} from '../../src/cache/prefix-folders.js'
import {GREEDY, type SamplingParams} from '../../src/engine/sampling.js'
import {native} from '../../src/native/native.js'
import type {Usage} from '../../src/engine/request.js'
import {synthFixture} from '../helpers/packages.js'
import {randomPrompt} from '../helpers/tokens.js'


const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname

async function generate(e: Engine, prompt: Int32Array, maxTokens: number, sampling: SamplingParams = GREEDY) {
  const tokens: number[] = []
  let usage: Usage | undefined
  for await (const ev of e.generate({prompt, maxTokens, sampling, stopTokenIds: []})) {
    if (ev.type === 'token') tokens.push(ev.token)
    else if (ev.type === 'done') usage = ev.usage
    else if (ev.type === 'error') throw ev.error
  }
  return {tokens, usage: usage!}
}

const files = (dir: string, sub: string) => readdirSync(join(dir, sub)).filter(f => !f.endsWith('.tmp'))

t.test('an exported and imported piece restores what the original restores', async t => {
  const m = await NativeModel.open(DEFAULT, 4096, {threads: 2})
  t.teardown(() => m.close())
  const h = m.handle
  const p = randomPrompt(300, 5000, 7)
  const a = native.createSequence(h, {maxLength: 4096})
  await native.step(h, [{seq: a, tokens: p, logits: 'none', capture: true}])
  await native.draft(h, [{seq: a, token: p[0]!, n: 0}]) // the draft takes in the context, so the rows carry it
  const rows = [native.saveRows(h, a, 0, 256), native.saveRows(h, a, 256, 44)]
  const state = native.saveState(h, a)
  const copies = [...rows, state].map(id => m.store.importSaved!(m.store.exportSaved!(id)))
  const next = async (rowIds: number[], st: number) => {
    const s = native.createSequence(h, {maxLength: 4096})
    t.equal(native.restoreSequence(h, s, rowIds, st), true, 'the draft context comes back too')
    const [r] = await native.step(h, [{seq: s, tokens: Int32Array.of(11, 12, 13), logits: 'all', capture: true}])
    native.freeSequence(h, s)
    return r!.logits!
  }
  const want = await next(rows, state)
  const got = await next(copies.slice(0, 2), copies[2]!)
  t.same(Array.from(got), Array.from(want), 'the same logits, bit for bit')
  const ex = m.store.exportSaved!(state)
  t.equal(ex.kind, 'state')
  // a piece of another shape is refused with a clear error, not misread
  const bad = {...m.store.exportSaved!(rows[1]!)}
  if (bad.kind === 'rows') bad.data = bad.data.subarray(1)
  t.throws(() => m.store.importSaved!(bad), /floats/)
  if (ex.kind === 'state') t.throws(() => m.store.importSaved!({...ex, data: ex.data.subarray(2)}), /recurrent floats/)
  for (const id of [...rows, state, ...copies]) native.freeSaved(h, id)
  native.freeSequence(h, a)
  t.equal(native.savedStats(h).rows + native.savedStats(h).states, 0, 'nothing left behind')
})

for (const pkg of ['default', 'synthetic tiny-hybrid with a DFlash 2 draft'] as const) {
  t.test(`evicted snapshots come back from disk with the tokens of a miss (${pkg})`, async t => {
    const dir = pkg === 'default' ? DEFAULT : await synthFixture('tiny-hybrid', 'q4', {dflash2: {window: 12}})
    const folder = mkdtempSync(join(tmpdir(), 'splash-disk-'))
    const m = await NativeModel.open(dir, 4096, {threads: 2})
    t.teardown(() => m.close())
    const cold = new Engine(m, {}, undefined, {cacheBytes: 0})
    const V = Math.min(m.vocabSize, 5000)
    const prompts = [randomPrompt(400, V, 1), randomPrompt(333, V, 2), randomPrompt(129, V, 3)]
    const want = []
    for (const p of prompts) want.push((await generate(cold, p, 12)).tokens)
    // a memory tier that holds one snapshot of the longest prompt: the others go to disk
    const one = m.store.stateBytes + 420 * m.store.rowBytes
    const disk = new PrefixDisk(folder, 1 << 30)
    const e = new Engine(m, {}, undefined, {cacheBytes: one, disk})
    for (const p of prompts) await generate(e, p, 12)
    await disk.flush()
    t.ok(disk.stats().snapshots >= 2, `evicted snapshots on disk (${disk.stats().snapshots})`)
    for (const [i, p] of prompts.entries()) {
      // the prompt again plus a new turn: resumes from the saved prompt (≥ its whole length less one)
      const longer = Int32Array.from([...p, ...want[i]!, 42, 43, 44])
      const hit = await generate(e, longer, 8)
      const miss = await generate(cold, longer, 8)
      t.same(hit.tokens, miss.tokens, `prompt ${i}: the tokens of a miss`)
      t.ok(hit.usage.cachedTokens >= p.length - 1, `prompt ${i}: ${hit.usage.cachedTokens} of ${longer.length} prompt tokens reused`)
    }
    t.ok(disk.stats().loads >= 2, `${disk.stats().loads} snapshots read back`)
    await e.idle() // the last request's snapshots are saved after its done event
    e.scheduler.cache!.clear()
    await disk.flush()
    const st = native.savedStats(m.handle)
    t.equal(st.rows + st.states, 0, 'nothing left natively after clear')
  })
}

t.test('a restart finds what the last server persisted; blocks are shared on disk', async t => {
  const folder = mkdtempSync(join(tmpdir(), 'splash-disk-'))
  const p = randomPrompt(700, 5000, 9)
  const turn2 = Int32Array.from([...p.subarray(0, 600), 5, 6, 7, 8])
  let first: number[]
  {
    const m = await NativeModel.open(DEFAULT, 4096, {threads: 2})
    const e = new Engine(m, {}, undefined, {cacheBytes: 64 << 20, disk: new PrefixDisk(folder, 1 << 30)})
    first = (await generate(e, p, 10)).tokens
    await generate(e, turn2, 4)
    await e.persist()
    m.close()
  }
  const blocks = files(folder, 'blocks')
  // each request leaves two snapshots: its prompt less one token, and the end of its generation
  t.equal(files(folder, 'snapshots').length, 4, 'four snapshots written')
  // the first prompt's snapshots hold 5 full blocks of 128 tokens; the second's (604 tokens) its first 4 of them
  t.equal(blocks.length, 5, `${blocks.length} block files: the shared ones once`)
  const m = await NativeModel.open(DEFAULT, 4096, {threads: 2})
  t.teardown(() => m.close())
  const disk = new PrefixDisk(folder, 1 << 30)
  t.equal(disk.stats().snapshots, 4, 'the index is rebuilt from the files')
  const e = new Engine(m, {}, undefined, {cacheBytes: 64 << 20, disk})
  const again = await generate(e, p, 10)
  t.same(again.tokens, first, 'the same greedy tokens after the restart')
  t.equal(again.usage.cachedTokens, p.length - 1, 'the whole prompt but its last token reused')
})

t.test('persisting counts a block shared by several snapshots once', async t => {
  const p = randomPrompt(700, 5000, 21)
  const m = await NativeModel.open(DEFAULT, 4096, {threads: 2})
  t.teardown(() => m.close())
  // what a prompt's snapshot and its answer's take on disk together, in an ample folder
  const ample = new PrefixDisk(mkdtempSync(join(tmpdir(), 'splash-disk-')), 1 << 30)
  {
    const e = new Engine(m, {}, undefined, {cacheBytes: 64 << 20, disk: ample})
    await generate(e, p, 10)
    await e.idle()
    await e.persist()
  }
  t.equal(ample.stats().snapshots, 2, 'the prompt less one token, and the end of the answer')
  const both = ample.stats().bytes
  // half of this folder's budget holds 1.5 times that: the two snapshots as files, not as two copies of the blocks
  const tight = new PrefixDisk(mkdtempSync(join(tmpdir(), 'splash-disk-')), Math.ceil(both * 3))
  const e = new Engine(m, {}, undefined, {cacheBytes: 64 << 20, disk: tight})
  await generate(e, p, 10)
  await e.idle()
  await e.persist()
  t.equal(tight.stats().snapshots, 2, 'both written')
  t.equal(tight.stats().bytes, both, 'the same files')
})

t.test('damaged files are misses, and are removed', async t => {
  const folder = mkdtempSync(join(tmpdir(), 'splash-disk-'))
  const p = randomPrompt(300, 5000, 4)
  const m = await NativeModel.open(DEFAULT, 4096, {threads: 2})
  t.teardown(() => m.close())
  const cold = new Engine(m, {}, undefined, {cacheBytes: 0})
  const want = (await generate(cold, p, 8)).tokens
  {
    const e = new Engine(m, {}, undefined, {cacheBytes: 64 << 20, disk: new PrefixDisk(folder, 1 << 30)})
    await generate(e, p, 8)
    await e.persist()
    await e.idle() // the last request's snapshots are saved after its done event
    e.scheduler.cache!.clear()
  }
  // the prompt's snapshot (at 299 tokens; the other is the end of the generation)
  const snap = files(folder, 'snapshots').find(f => f.includes('-299-'))
  const path = join(folder, 'snapshots', snap!)
  const bytes = readFileSync(path)
  writeFileSync(path, bytes.subarray(0, bytes.length - 100)) // torn write
  const disk = new PrefixDisk(folder, 1 << 30)
  t.equal(disk.stats().snapshots, 2, 'the header still reads')
  const e = new Engine(m, {}, undefined, {cacheBytes: 64 << 20, disk})
  const r = await generate(e, p, 8)
  t.same(r.tokens, want, 'the request is served as a miss')
  t.equal(r.usage.cachedTokens, 0)
  await disk.flush()
  t.equal(disk.stats().snapshots, 1, 'the damaged snapshot is forgotten')
  t.notOk(files(folder, 'snapshots').includes(snap!), 'and its file deleted')
  writeFileSync(join(folder, 'snapshots', 'junk.snap'), 'not a snapshot')
  writeFileSync(join(folder, 'blocks', 'orphan.kv'), 'no snapshot holds this')
  const reopened = new PrefixDisk(folder, 1 << 30)
  t.equal(reopened.stats().snapshots, 1, 'the sound one is still there')
  t.notOk(files(folder, 'snapshots').includes('junk.snap'), 'unreadable snapshots are deleted at open')
  t.notOk(files(folder, 'blocks').includes('orphan.kv'), 'blocks no snapshot holds are deleted at open')
  await e.idle() // the last request's snapshots are saved after its done event
  e.scheduler.cache!.clear()
  await disk.flush()
})

t.test('the folder stays inside its budget, least recently used first', async t => {
  const folder = mkdtempSync(join(tmpdir(), 'splash-disk-'))
  const m = await NativeModel.open(DEFAULT, 4096, {threads: 2})
  t.teardown(() => m.close())
  const per = m.store.stateBytes + 200 * m.store.rowBytes
  const budget = Math.floor(per * 3.5)
  const disk = new PrefixDisk(folder, budget)
  const e = new Engine(m, {}, undefined, {cacheBytes: per, disk})
  for (let i = 0; i < 8; i++) await generate(e, randomPrompt(200, 5000, 100 + i), 2)
  await e.idle() // the last request's snapshots are saved after its done event
  e.scheduler.cache!.clear()
  await disk.flush()
  let bytes = 0
  for (const sub of ['snapshots', 'blocks']) for (const f of files(folder, sub)) bytes += statSync(join(folder, sub, f)).size
  t.ok(bytes <= budget, `${bytes} bytes on disk, budget ${budget}`)
  t.equal(bytes, disk.stats().bytes, 'the count matches the files')
  t.ok(disk.stats().snapshots >= 2 && disk.stats().snapshots < 8, `${disk.stats().snapshots} snapshots kept`)
})

t.test('an agent looping on one request adds nothing per attempt, in memory or on disk; the cap holds', async t => {
  // the default package on the real engine, sampled answers (each attempt answers differently), and an idle write
  // to disk after every attempt, as an agent's retries leave the server idle between them
  const folder = mkdtempSync(join(tmpdir(), 'splash-disk-'))
  const m = await NativeModel.open(DEFAULT, 4096, {threads: 2})
  t.teardown(() => m.close())
  const per = m.store.stateBytes + 700 * m.store.rowBytes
  const budget = per * 4
  const disk = new PrefixDisk(folder, budget)
  const e = new Engine(m, {}, undefined, {cacheBytes: per * 8, disk})
  const prompt = randomPrompt(600, 5000, 4242)
  const sampled: SamplingParams = {...GREEDY, temperature: 1, seed: 1}
  const onDisk = () => {
    let bytes = 0
    for (const sub of ['snapshots', 'blocks']) for (const f of files(folder, sub)) bytes += statSync(join(folder, sub, f)).size
    return {snapshots: files(folder, 'snapshots').length, blocks: files(folder, 'blocks').length, bytes}
  }
  const first = await generate(e, prompt, 24, sampled)
  t.equal(first.usage.cachedTokens, 0)
  await e.persist()
  const after1 = onDisk()
  const held1 = e.scheduler.cache!.stats()
  t.ok(after1.snapshots >= 2, `the first attempt's prompt and answer are kept: ${JSON.stringify(after1)}`)
  const answers = new Set<string>([first.tokens.join(',')])
  for (let i = 0; i < 12; i++) {
    const again = await generate(e, prompt, 24, {...sampled, seed: 2 + i})
    t.equal(again.usage.cachedTokens, prompt.length - 1, `attempt ${i + 2} reuses the whole prompt`)
    answers.add(again.tokens.join(','))
    await e.persist()
    t.same(onDisk(), after1, `attempt ${i + 2} writes nothing new`)
    t.ok(onDisk().bytes <= budget, 'the folder stays inside its cap')
  }
  t.ok(answers.size > 1, `the attempts answered differently (${answers.size} answers), so each could have been a new snapshot`)
  t.same(e.scheduler.cache!.stats().snapshots, held1.snapshots, 'nor in memory')
  // a new turn (the prompt grown by an answer and a user message) is no repeat: its answer is kept
  const next = Int32Array.from([...prompt, ...first.tokens, ...randomPrompt(40, 5000, 99)])
  await generate(e, next, 8, sampled)
  await e.persist()
  t.ok(onDisk().snapshots > after1.snapshots, 'a conversation that moves on is saved as before')
  t.ok(onDisk().bytes <= budget, 'and the cap holds')
})

t.test('300 requests, random cancellations (some while their prefix is read back): nothing left behind', async t => {
  const folder = mkdtempSync(join(tmpdir(), 'splash-disk-'))
  const m = await NativeModel.open(await synthFixture('tiny-hybrid', 'q4'), 4096, {threads: 2})
  t.teardown(() => m.close())
  const V = Math.min(m.vocabSize, 5000)
  // ten conversations' prefixes, and a memory tier that holds about three snapshots: the rest live on disk
  const bases = Array.from({length: 10}, (_, i) => randomPrompt(200, V, 500 + i))
  const disk = new PrefixDisk(folder, 1 << 30)
  const e = new Engine(m, {maxRunning: 8}, undefined, {cacheBytes: 3 * (m.store.stateBytes + 230 * m.store.rowBytes), disk})
  let x = 777
  const rand = () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32
  const reasons: string[] = []
  let next = 0
  const one = async (i: number) => {
    const p = Int32Array.from([...bases[Math.floor(rand() * bases.length)]!, ...randomPrompt(1 + Math.floor(rand() * 20), V, 9000 + i)])
    const ac = new AbortController()
    const mode = rand()
    const events = e.generate({prompt: p, maxTokens: 1 + Math.floor(rand() * 8), sampling: GREEDY, stopTokenIds: [], signal: ac.signal})
    if (mode < 0.2) ac.abort() // at once: often while its prefix is still being read from disk
    let n = 0
    for await (const ev of events) {
      if (ev.type === 'token' && ++n === 2 && mode < 0.4) ac.abort()
      if (ev.type === 'done') return ev.reason
      if (ev.type === 'error') throw ev.error
    }
    return 'ended'
  }
  await Promise.all(Array.from({length: 32}, async () => {
    for (let i = next++; i < 300; i = next++) reasons.push(await one(i))
  }))
  await e.idle()
  t.equal(reasons.length, 300)
  t.ok(reasons.includes('cancelled') && reasons.some(r => r !== 'cancelled'), 'both cancelled and completed requests')
  t.ok(disk.stats().loads > 0, `${disk.stats().loads} snapshots read back from disk`)
  const stats = e.scheduler.cache!.stats()
  t.ok(stats.bytes <= stats.capacityBytes, 'the memory tier stays inside its budget')
  t.equal(m.savedStats().sequences, 0, 'no live sequence')
  e.scheduler.cache!.clear()
  await disk.flush()
  t.has(m.savedStats(), {sequences: 0, rows: 0, states: 0, bytes: 0}, 'nothing saved natively after clear')
})

t.test("other signatures' folders together keep under one budget, least recently written first", async t => {
  const root = mkdtempSync(join(tmpdir(), 'splash-roots-'))
  const make = (name: string, bytes: number, ageMs: number) => {
    const dir = join(root, name, 'snapshots')
    mkdirSync(dir, {recursive: true})
    const f = join(dir, 'a.snap')
    writeFileSync(f, Buffer.alloc(bytes))
    const when = new Date(Date.now() - ageMs)
    utimesSync(f, when, when)
  }
  make('old', 600, 3_000_000)
  make('mid', 300, 2_000_000)
  make('new', 300, 1_000_000)
  make('mine', 5000, 5_000_000)
  trimOtherFolders(root, 'mine', 700)
  t.same(readdirSync(root).sort(), ['mid', 'mine', 'new'], 'the oldest other folder went whole; this one is never touched')
  trimOtherFolders(root, 'mine', 10_000)
  t.same(readdirSync(root).sort(), ['mid', 'mine', 'new'], 'nothing goes while they fit')
})

t.test('requests that share a prefix on disk read it once; pieces another model refuses are forgotten', async t => {
  const folder = mkdtempSync(join(tmpdir(), 'splash-disk-'))
  const p = randomPrompt(300, 500, 31) // ids every package here has
  {
    const m = await NativeModel.open(DEFAULT, 4096, {threads: 2})
    const e = new Engine(m, {}, undefined, {cacheBytes: 64 << 20, disk: new PrefixDisk(folder, 1 << 30)})
    await generate(e, p, 4)
    await e.persist()
    m.close()
  }
  {
    const m = await NativeModel.open(DEFAULT, 4096, {threads: 2})
    const disk = new PrefixDisk(folder, 1 << 30)
    const e = new Engine(m, {}, undefined, {cacheBytes: 64 << 20, disk})
    const both = await Promise.all([generate(e, p, 4), generate(e, p, 4)])
    t.same(both.map(r => r.usage.cachedTokens), [p.length - 1, p.length - 1], 'both resume from the snapshot')
    t.equal(disk.stats().loads, 1, 'read from disk once')
    await e.idle()
    e.scheduler.cache!.clear()
    await disk.flush()
    m.close()
  }
  // a package of other shapes on the same folder (a signature would keep them apart; here they share it on purpose)
  const other = await NativeModel.open(await synthFixture('tiny-hybrid', 'q4'), 4096, {threads: 2})
  t.teardown(() => other.close())
  const disk = new PrefixDisk(folder, 1 << 30)
  const before = disk.stats().snapshots
  const e = new Engine(other, {}, undefined, {cacheBytes: 64 << 20, disk})
  const r = await generate(e, p, 4)
  t.equal(r.usage.cachedTokens, 0, 'served as a miss')
  await disk.flush()
  t.ok(disk.stats().snapshots < before, `the refused snapshot is forgotten (${before} → ${disk.stats().snapshots})`)
  await e.idle()
  e.scheduler.cache!.clear()
  await disk.flush()
  t.has(other.savedStats(), {rows: 0, states: 0}, 'nothing of it left natively')
})

t.test('a folder of another signature that has held no snapshot for a day goes', async t => {
  const root = mkdtempSync(join(tmpdir(), 'splash-roots-'))
  for (const name of ['stale', 'fresh', 'full', 'mine']) mkdirSync(join(root, name, 'snapshots'), {recursive: true})
  writeFileSync(join(root, 'full', 'snapshots', 'a.snap'), 'x')
  const dayAgo = new Date(Date.now() - 25 * 3600 * 1000)
  for (const name of ['stale', 'full', 'mine']) utimesSync(join(root, name), dayAgo, dayAgo)
  utimesSync(join(root, 'full', 'snapshots', 'a.snap'), dayAgo, dayAgo)
  trimOtherFolders(root, 'mine', 1 << 20)
  t.same(readdirSync(root).sort(), ['fresh', 'full', 'mine'], 'only the stale empty one')
})
