import t from 'tap'
import {existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {listLinks} from '../../src/package/links.js'
import {checkMemory} from '../../src/package/memory-check.js'
import {pullPackage, resolvePackage} from '../../src/package/resolve.js'
import {synthPackage} from '../../src/package/synth/synth.js'
import {startFakeHub, type FakeHub} from '../fixtures/package/fake-hub.js'
import {flushFixtures, writeFixture} from '../fixtures/package/checkpoints.js'

const root = mkdtempSync(join(tmpdir(), 'splash-hub-'))
const repos = join(root, 'repos')
let hub: FakeHub
let pkgSha256 = ''

t.before(async () => {
  const m = await synthPackage({preset: 'tiny-hybrid', out: join(repos, 'splash/tiny'), quant: 'q4'})
  pkgSha256 = m.files.find(f => f.path === 'model.safetensors')!.sha256
  writeFixture(join(repos, 'org/ckpt'), {kind: 'qwen3', names: 'text'})
  await flushFixtures()
  hub = await startFakeHub()
  hub.repos.set('splash/tiny', join(repos, 'splash/tiny'))
  hub.repos.set('org/ckpt', join(repos, 'org/ckpt'))
})
t.teardown(() => hub.close())

let envN = 0
function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const n = envN++
  return {HF_HUB_CACHE: join(root, `cache${n}`), SPLASH_DATA_DIR: join(root, `data${n}`), HF_ENDPOINT: hub.url, ...extra}
}
const snapshotOf = (e: NodeJS.ProcessEnv) => {
  const base = join(e.HF_HUB_CACHE!, 'models--splash--tiny')
  const sha = readFileSync(join(base, 'refs', 'main'), 'utf8').trim()
  return {base, sha, dir: join(base, 'snapshots', sha)}
}

let firstEnv: NodeJS.ProcessEnv
t.test('fresh download into the standard cache, then reuse without any request, then offline', async t => {
  const e = (firstEnv = env())
  const r = await resolvePackage('splash/tiny', {env: e})
  t.equal(r.source, 'hub')
  const {base, sha, dir} = snapshotOf(e)
  t.match(sha, /^[0-9a-f]{40}$/)
  t.equal(r.dir, dir)
  const link = join(dir, 'model.safetensors')
  t.ok(lstatSync(link).isSymbolicLink(), 'snapshot entries are symlinks')
  t.equal(readlinkSync(link), `../../blobs/${pkgSha256}`, 'LFS blob named by its sha256, relative link')
  t.ok(existsSync(join(base, 'blobs', pkgSha256)))
  t.notOk(readdirSync(join(base, 'blobs')).some(f => f.endsWith('.incomplete')))
  const links = await listLinks(e.SPLASH_DATA_DIR)
  t.same(links.map(l => [l.name, l.repo, l.snapshot, l.present]), [['splash/synth-tiny-hybrid', 'splash/tiny', sha, true]])

  const before = hub.requests.length
  const again = await resolvePackage('splash/tiny', {env: e})
  t.equal(again.source, 'cache')
  t.equal(hub.requests.length, before, 'a verified cached package needs no request')

  // hub gone: still resolves; pull falls back to the cache too and says so
  const dead = {...e, HF_ENDPOINT: 'http://127.0.0.1:9'}
  t.equal((await resolvePackage('splash/tiny', {env: dead})).source, 'cache')
  const lines: string[] = []
  const pulled = await pullPackage('splash/tiny', {env: dead, log: l => lines.push(l)})
  t.equal(pulled.source, 'cache')
  t.match(lines.join('\n'), /unreachable.*using the cached snapshot/)
  t.equal((await resolvePackage('splash/tiny', {env: {...e, HF_HUB_OFFLINE: '1'}})).source, 'cache')
})

t.test('resume after a transfer cut midway', async t => {
  const e = env()
  hub.cutAfter.set('model.safetensors', 40000)
  await t.rejects(resolvePackage('splash/tiny', {env: e}))
  const blobs = join(e.HF_HUB_CACHE!, 'models--splash--tiny', 'blobs')
  const partial = readdirSync(blobs).find(f => f.endsWith('.incomplete'))
  t.ok(partial, 'a partial blob is left')
  const have = lstatSync(join(blobs, partial!)).size
  t.ok(have > 0 && have <= 40000, `partial has ${have} bytes`)
  const from = hub.requests.length
  const lines: string[] = []
  const r = await resolvePackage('splash/tiny', {env: e, log: l => lines.push(l)})
  t.equal(r.source, 'hub')
  t.ok(hub.requests.slice(from).some(q => q.includes(`bytes=${have}-`)), 'second attempt asks for the rest only')
  t.match(lines.join('\n'), new RegExp(`resuming model.safetensors at ${have}`))
})

t.test('a corrupted blob is named, evicted and fetched again', async t => {
  const e = env()
  await resolvePackage('splash/tiny', {env: e})
  const {base} = snapshotOf(e)
  const blob = join(base, 'blobs', pkgSha256)
  const bytes = readFileSync(blob)
  bytes[bytes.length >> 1] ^= 0xff
  writeFileSync(blob, bytes) // same size, different content
  const lines: string[] = []
  const r = await resolvePackage('splash/tiny', {env: e, log: l => lines.push(l)})
  t.equal(r.source, 'hub')
  t.match(lines.join('\n'), /model\.safetensors has sha256 .* the manifest says .*downloading it again/)
  t.not(readFileSync(blob)[bytes.length >> 1], bytes[bytes.length >> 1], 'blob restored')
  // a tampered manifest (same size) is caught against the hub's git blob id and fetched again
  const manifestPath = join(snapshotOf(e).dir, 'splash.json')
  const text = readFileSync(manifestPath, 'utf8')
  writeFileSync(manifestPath, text.replace('synth-tiny-hybrid', 'synth-tiny-hybriX'))
  t.equal((await resolvePackage('splash/tiny', {env: e, refresh: true})).manifest.name, 'splash/synth-tiny-hybrid')
  t.equal(readFileSync(manifestPath, 'utf8'), text)
  // truncated and the hub unreachable: the error names the file
  writeFileSync(blob, bytes.subarray(0, 100))
  await t.rejects(
    resolvePackage('splash/tiny', {env: {...e, HF_ENDPOINT: 'http://127.0.0.1:9'}}),
    /model\.safetensors has 100 bytes, the manifest says/,
  )
})

t.test('hub errors: wrong token, missing repo, not a package', async t => {
  hub.token = 'hf_good'
  await t.rejects(resolvePackage('splash/tiny', {env: env({HF_TOKEN: 'hf_bad'})}), {code: 'hub_unauthorized', message: /refused access to splash\/tiny \(401\).*HF_TOKEN/})
  t.equal((await resolvePackage('splash/tiny', {env: env({HF_TOKEN: 'hf_good'})})).source, 'hub', 'the right token works')
  await t.rejects(resolvePackage('splash/tiny', {env: env({HF_TOKEN: 'oops'})}), {code: 'hub_unauthorized', message: /HF_TOKEN is not a hub token/})
  hub.token = undefined
  await t.rejects(resolvePackage('nobody/nothing', {env: env()}), {code: 'repo_not_found', message: /nobody\/nothing was not found on .* \(404\)/})
  await t.rejects(resolvePackage('org/ckpt', {env: env()}), {code: 'not_a_package', message: /org\/ckpt is not a Splash package.*splash package build/})
  await t.rejects(resolvePackage('not a repo', {env: env()}), /no such folder, and not a hub repo id/)
})

t.test('local folders are verified the same way, without download', async t => {
  const e = env()
  const dir = join(root, 'local')
  mkdirSync(dir)
  const m = await synthPackage({preset: 'tiny-moe', out: dir, quant: 'q8'})
  const r = await resolvePackage(dir, {env: e})
  t.equal(r.source, 'local')
  t.equal(r.manifest.name, m.name)
  await t.rejects(resolvePackage(join(repos, 'org/ckpt'), {env: e}), /is not a Splash package.*build one with `splash package build \S*org\/ckpt --out \.\/ckpt-splash`/)
  writeFileSync(join(dir, 'tokenizer.json'), '{}')
  await t.rejects(resolvePackage(dir, {env: e}), /verification failed: tokenizer\.json has \d+ bytes/)
})

t.test('memory check', async t => {
  const e = env()
  const r = await resolvePackage(join(repos, 'splash/tiny'), {env: e, record: false})
  const ok = checkMemory(r.manifest, 1024 ** 3)
  t.ok(ok.fits)
  t.match(ok.lines.join('\n'), /weights \(q4\)[\s\S]*draft[\s\S]*attention KV[\s\S]*GDN[\s\S]*total needed[\s\S]*available/)
  const no = checkMemory(r.manifest, 1024 ** 3, 1024 * 1024)
  t.notOk(no.fits)
  t.match(no.lines.join('\n'), /budget \(--max-memory\)[\s\S]*does not fit/)
})

t.test('the hub server stopped: a cached package still resolves, an uncached one says why', async t => {
  await hub.close()
  const r = await resolvePackage('splash/tiny', {env: firstEnv})
  t.equal(r.source, 'cache')
  const pulled = await pullPackage('splash/tiny', {env: firstEnv})
  t.equal(pulled.source, 'cache')
  await t.rejects(resolvePackage('splash/tiny', {env: env()}), {code: 'hub_unreachable', message: /cannot reach .* and it is not in the cache/})
})
