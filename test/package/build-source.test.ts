// `splash package build owner/repo`: @huggingface/hub itself against a local hub (test/helpers/local-hub.ts, a
// real HTTP server), no network. A checkpoint and its draft are checked from their metadata, downloaded into the
// standard cache, verified and built; bad input is refused in one line before the weights move; a tampered file is
// caught by its sha256; a build killed mid-file resumes where it stopped; --push uploads the package so that
// `splash pull` gets it back.
import t from 'tap'
import {existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync} from 'node:fs'
import {spawn} from 'node:child_process'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {buildFromSource} from '../../src/package/hub/build-source.js'
import {resolvePackage} from '../../src/package/resolve.js'
import {toBf16} from '../../src/package/builder/quantize.js'
import {writeSafetensors} from '../../src/package/safetensors.js'
import {checkPackage} from '../../src/package/verify.js'
import {flushFixtures, writeFixture, type FixtureOptions} from '../fixtures/package/checkpoints.js'
import {bin, runCli} from '../helpers/cli.js'
import {startLocalHub, type LocalHub} from '../helpers/local-hub.js'

const root = mkdtempSync(join(tmpdir(), 'splash-build-hub-'))
let hub: LocalHub
const H = 64

/** A z-lab-layout DFlash draft: fc over `taps.length` features of width `targetH`, one Qwen3 layer. */
async function writeDraft(dir: string, taps: number[], targetH = H): Promise<void> {
  mkdirSync(dir, {recursive: true})
  const v = (n: number) => toBf16(new Float32Array(n).fill(0.25))
  const t2 = (name: string, shape: number[]) => ({name, dtype: 'BF16' as const, shape, data: v(shape.reduce((a, b) => a * b, 1))})
  const L = 'layers.0'
  await writeSafetensors(join(dir, 'model.safetensors'), [
    t2('fc.weight', [H, taps.length * targetH]), t2('hidden_norm.weight', [H]), t2('norm.weight', [H]),
    t2(`${L}.input_layernorm.weight`, [H]), t2(`${L}.post_attention_layernorm.weight`, [H]),
    t2(`${L}.self_attn.q_proj.weight`, [64, H]), t2(`${L}.self_attn.k_proj.weight`, [32, H]), t2(`${L}.self_attn.v_proj.weight`, [32, H]),
    t2(`${L}.self_attn.o_proj.weight`, [H, 64]), t2(`${L}.self_attn.q_norm.weight`, [32]), t2(`${L}.self_attn.k_norm.weight`, [32]),
    t2(`${L}.mlp.gate_proj.weight`, [128, H]), t2(`${L}.mlp.up_proj.weight`, [128, H]), t2(`${L}.mlp.down_proj.weight`, [H, 128]),
  ])
  writeFileSync(join(dir, 'config.json'), JSON.stringify({
    architectures: ['DFlashDraftModel'], model_type: 'qwen3', hidden_size: H, intermediate_size: 128, num_hidden_layers: 1,
    num_attention_heads: 2, num_key_value_heads: 1, head_dim: 32, rope_theta: 1000000, rms_norm_eps: 1e-6, block_size: 16,
    dflash_config: {mask_token_id: 90, target_layer_ids: taps},
  }))
}

function repo(id: string, fn: (dir: string) => void | Promise<void>, opts: {private?: boolean; gated?: boolean} = {}) {
  return async () => {
    const dir = join(root, 'repos', id)
    await fn(dir)
    await flushFixtures()
    hub.repos.set(id, {dir, ...opts})
  }
}

t.before(async () => {
  hub = await startLocalHub()
  hub.pageSize = 3 // the tree listing comes in several pages
  const ckpt = (dir: string) => void writeFixture(dir, {kind: 'qwen3', names: 'text'})
  await repo('org/ckpt', ckpt)()
  await repo('org/ckpt-gated', ckpt, {gated: true})()
  await repo('org/ckpt-private', ckpt, {private: true})()
  await repo('org/draft', d => writeDraft(d, [1, 2]))()
  await repo('org/draft-other', d => writeDraft(d, [1, 2], 128))()
  await repo('org/draft-deep', d => writeDraft(d, [1, 9]))()
  await repo('org/llama', d => {
    writeFixture(d, {kind: 'qwen3', names: 'text'})
    const cfg = JSON.parse(readFileSync(join(d, 'config.json'), 'utf8'))
    writeFileSync(join(d, 'config.json'), JSON.stringify({...cfg, architectures: ['LlamaForCausalLM'], model_type: 'llama'}))
  })()
  await repo('org/wrong-shapes', d => {
    writeFixture(d, {kind: 'qwen3', names: 'text'})
    const cfg = JSON.parse(readFileSync(join(d, 'config.json'), 'utf8'))
    writeFileSync(join(d, 'config.json'), JSON.stringify({...cfg, intermediate_size: 256}))
  })()
  await repo('Qwen/Qwen3.5-27B', ckpt)()
  for (const [id, o] of LAYOUTS) await repo(id, d => void writeFixture(d, o))()
})
t.teardown(() => hub.close())

const LAYOUTS: Array<[string, FixtureOptions]> = [
  ['layouts/qwen3_5-vl-sharded', {kind: 'dense', names: 'vl', shards: 3}],
  ['layouts/qwen3_5-mlx', {kind: 'dense', names: 'mlx'}],
  ['layouts/qwen3_5_moe-packed', {kind: 'moe', names: 'text', experts: 'packed'}],
  ['layouts/qwen3_5_moe-mlx', {kind: 'moe', names: 'mlx', experts: 'switch'}],
  ['layouts/qwen3_next', {kind: 'next', names: 'text'}],
]

let n = 0
function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const k = n++
  return {HF_HUB_CACHE: join(root, `cache${k}`), SPLASH_DATA_DIR: join(root, `data${k}`), HF_ENDPOINT: hub.url, ...extra}
}
const blobsOf = (e: NodeJS.ProcessEnv, id: string) => {
  const d = join(e.HF_HUB_CACHE!, `models--${id.replace('/', '--')}`, 'blobs')
  return existsSync(d) ? readdirSync(d) : []
}
/** Requests that moved a whole weights file (not the header probes). */
const weightTransfers = (from: number) => hub.requests.slice(from).filter(r => /^GET \/lfs\//.test(r) && !/bytes=0-\d+$/.test(r))

t.test('owner/repo with a hub draft: checked, downloaded into the cache, verified, built', async t => {
  const e = env()
  const lines: string[] = []
  const out = join(root, 'pkg')
  const r = await buildFromSource({source: 'org/ckpt', draft: 'org/draft', out, quant: 'q4', env: e, log: l => lines.push(l)})
  t.equal(r.manifest.name, 'org/ckpt', 'named after the repo')
  t.match(r.manifest.provenance.source, /^org\/ckpt@[0-9a-f]{12}$/)
  t.same(r.manifest.draft?.config.target_layer_ids, [1, 2])
  t.same(await checkPackage(out, r.manifest), [])
  const base = join(e.HF_HUB_CACHE!, 'models--org--ckpt')
  const sha = readFileSync(join(base, 'refs', 'main'), 'utf8').trim()
  t.match(sha, /^[0-9a-f]{40}$/)
  t.ok(existsSync(join(base, 'snapshots', sha, 'model.safetensors')), 'the standard cache layout')
  t.notOk(blobsOf(e, 'org/ckpt').some(b => b.endsWith('.incomplete')))
  t.ok(hub.requests.some(q => /\/tree\/.*/.test(q)) && hub.requests.some(q => q.includes('/lfs/')), 'listing and LFS redirect used')
  // a second build needs no transfer: the cached snapshot is verified again
  const from = hub.requests.length
  await buildFromSource({source: 'org/ckpt', out: join(root, 'pkg2'), quant: 'q8', env: e})
  t.same(weightTransfers(from), [], 'nothing downloaded again')
})

t.test('every checkpoint layout the builder takes builds from the hub (sharded, MLX, MoE, Qwen3-Next)', async t => {
  for (const [id, o] of LAYOUTS) {
    const out = join(root, 'layout', id)
    const r = await buildFromSource({source: id, out, quant: 'q4', env: env()})
    t.equal(r.manifest.family, o.kind === 'dense' ? 'qwen3_5' : o.kind === 'moe' ? 'qwen3_5_moe' : 'qwen3_next', id)
    t.same(await checkPackage(out, r.manifest), [], `${id} verifies`)
  }
})

t.test('bad input: one line naming the repo, before the weights move', async t => {
  const cases: Array<[string, string | undefined, Record<string, string>, RegExp]> = [
    ['nobody/nothing', undefined, {}, /^nobody\/nothing was not found on .* \(404\)|refused access to nobody\/nothing/],
    ['org/ckpt-gated', undefined, {}, /^org\/ckpt-gated is gated on .*: accept its terms there and set HF_TOKEN/],
    ['org/ckpt-gated', undefined, {HF_TOKEN: 'hf_wrong'}, /refused access to org\/ckpt-gated \(401\).*HF_TOKEN/],
    ['org/ckpt-private', undefined, {}, /refused access to org\/ckpt-private \(401\): set HF_TOKEN/],
    ['org/llama', undefined, {}, /^org\/llama: unsupported architecture LlamaForCausalLM; supported: /],
    ['org/wrong-shapes', undefined, {}, /^org\/wrong-shapes: model\.layers\.0\.mlp\.gate_proj is \[128,64\] where the config implies \[256,64\]/],
    ['org/ckpt', 'org/draft-other', {}, /^org\/draft-other: draft fc takes 256 features but 2 taps of this target \(hidden 64\) give 128: a draft for another target/],
    ['org/ckpt', 'org/draft-deep', {}, /^org\/draft-deep: draft taps layer 9 but the target has 4 layers/],
    ['org/ckpt', 'nobody/draft', {}, /nobody\/draft was not found|refused access to nobody\/draft/],
  ]
  for (const [source, draft, extra, msg] of cases) {
    const e = env(extra)
    const from = hub.requests.length
    const err = (await buildFromSource({source, draft, out: join(root, 'never'), quant: 'q4', env: e}).then(() => undefined, x => x)) as Error
    t.ok(err, `${source}${draft ? ` + ${draft}` : ''} refused`)
    t.match(err?.message, msg)
    t.notMatch(err?.message, /\n/, 'one line')
    t.same(weightTransfers(from), [], `${source}: no weights downloaded`)
  }
  t.equal((await buildFromSource({source: 'org/ckpt-gated', out: join(root, 'gated'), quant: 'q4', env: env({HF_TOKEN: hub.token})})).manifest.name, 'org/ckpt-gated', 'the right token reads a gated repo')
  t.equal((await buildFromSource({source: 'org/ckpt-private', out: join(root, 'private'), quant: 'q4', env: env({HF_TOKEN: hub.token})})).manifest.name, 'org/ckpt-private')
})

t.test('a tampered file is caught by its sha256, evicted and fetched again; tampered twice is an error', async t => {
  const e = env()
  hub.tamper.set('model.safetensors', 1)
  const lines: string[] = []
  const r = await buildFromSource({source: 'org/ckpt', out: join(root, 'tampered1'), quant: 'q4', env: e, log: l => lines.push(l)})
  t.match(lines.join('\n'), /org\/ckpt: model\.safetensors has sha256 [0-9a-f]{16}…, the hub says [0-9a-f]{16}…; removing it from the cache and downloading it again/)
  t.same(await checkPackage(join(root, 'tampered1'), r.manifest), [])
  hub.tamper.set('model.safetensors', 2)
  await t.rejects(buildFromSource({source: 'org/ckpt', out: join(root, 'tampered2'), quant: 'q4', env: env()}), {
    code: 'verification_failed', message: /^org\/ckpt@[0-9a-f]{12}: model\.safetensors has sha256 .* after a second download$/,
  })
  t.notOk(existsSync(join(root, 'tampered2', 'splash.json')), 'nothing built from it')
})

t.test('killed mid-download (SIGKILL), then resumed from the partial blob', async t => {
  const e = env()
  const size = statSync(join(root, 'repos', 'org/ckpt', 'model.safetensors')).size
  const cut = Math.floor(size / 2)
  hub.stallAfter.set('model.safetensors', cut)
  const child = spawn(process.execPath, [bin, 'package', 'build', 'org/ckpt', '--out', join(root, 'killed')], {env: {...process.env, ...e}, stdio: 'ignore'})
  const exited = new Promise(r => child.on('exit', r))
  await hub.stalled()
  const blobs = join(e.HF_HUB_CACHE!, 'models--org--ckpt', 'blobs')
  const partial = () => readdirSync(blobs).find(f => f.endsWith('.incomplete'))
  for (let i = 0; i < 200 && !(partial() && statSync(join(blobs, partial()!)).size >= cut); i++) await new Promise(r => setTimeout(r, 25))
  child.kill('SIGKILL')
  await exited
  t.equal(statSync(join(blobs, partial()!)).size, cut, `the partial blob holds ${cut} of ${size} bytes`)
  const from = hub.requests.length
  const lines: string[] = []
  const r = await buildFromSource({source: 'org/ckpt', out: join(root, 'resumed'), quant: 'q4', env: e, log: l => lines.push(l)})
  t.ok(hub.requests.slice(from).some(q => q.endsWith(`bytes=${cut}-`) || q.includes(`bytes=${cut}-${size - 1}`)), 'the rest is asked for with a Range')
  t.match(lines.join('\n'), new RegExp(`resuming model\\.safetensors at ${cut} of ${size} bytes`))
  t.same(await checkPackage(join(root, 'resumed'), r.manifest), [], 'the resumed file verifies')
})

t.test('--push uploads the package; splash pull gets it back; a dry run sends nothing', async t => {
  const e = env({HF_TOKEN: hub.token})
  const lines: string[] = []
  const r = await buildFromSource({source: 'org/ckpt', draft: 'org/draft', push: 'me/ckpt-splash', quant: 'q4', env: e, log: l => lines.push(l)})
  t.match(r.pushed?.commit, /^[0-9a-f]{40}$/)
  t.equal(r.out, undefined, 'built in a temporary folder only')
  t.ok(hub.requests.some(q => q.startsWith('PUT /lfs-upload/')), 'the weights went by the LFS batch API')
  const got = await resolvePackage('me/ckpt-splash', {env: env()})
  t.equal(got.source, 'hub')
  t.equal(got.manifest.name, 'org/ckpt')
  t.same(got.manifest.draft?.config.target_layer_ids, [1, 2])
  const from = hub.requests.length
  const dry = await buildFromSource({source: 'org/ckpt', push: 'me/other', dryRun: true, quant: 'q4', env: e})
  t.equal(dry.pushed?.commit, undefined)
  t.ok(dry.pushed!.files.some(f => f.path === 'model.safetensors') && dry.pushed!.files.some(f => f.path === 'splash.json'))
  t.notOk(hub.requests.slice(from).some(q => !q.startsWith('GET') && !q.includes('paths-info')), 'no write request in a dry run')
  await t.rejects(buildFromSource({source: 'org/ckpt', push: 'me/x', quant: 'q4', env: env()}), /--push me\/x: set HF_TOKEN to a token with write access/)
  await t.rejects(buildFromSource({source: 'org/ckpt', quant: 'q4', env: env()}), /--out DIR or --push owner\/repo/)
})

t.test('serve --model on a plain checkpoint prints the exact build command and the known draft', async t => {
  const e = env()
  await t.rejects(resolvePackage('Qwen/Qwen3.5-27B', {env: e}), {
    code: 'not_a_package',
    message: 'Qwen/Qwen3.5-27B is not a Splash package (no splash.json; a plain MLX or Transformers checkpoint?); build one with `splash package build Qwen/Qwen3.5-27B --draft z-lab/Qwen3.5-27B-DFlash --out ./Qwen3.5-27B-splash` (z-lab/Qwen3.5-27B-DFlash is the published DFlash draft for it)',
  })
  const r = await runCli(['serve', '--model', 'Qwen/Qwen3.5-27B', '--port', '18401'], e)
  t.equal(r.code, 1)
  t.match(r.stderr, /splash package build Qwen\/Qwen3\.5-27B --draft z-lab\/Qwen3\.5-27B-DFlash --out \.\/Qwen3\.5-27B-splash/)
  const plain = await runCli(['package', 'build', 'org/llama', '--out', join(root, 'cli-llama')], e)
  t.equal(plain.code, 1)
  t.match(plain.stderr, /^Error: org\/llama: unsupported architecture LlamaForCausalLM/m)
})
