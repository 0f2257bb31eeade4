// `splash serve --model`: a hub repo downloaded through the hub API (a local fake hub), a local folder, a plain
// checkpoint (refused with the way out), and a model that does not fit (the plan, then a non-zero exit).
import t from 'tap'
import {mkdtemp, rm, mkdir, writeFile, cp} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {runCli, startServe} from '../helpers/cli.js'
import {synthFixture} from '../helpers/packages.js'
import {startFakeHub, type FakeHub} from '../fixtures/package/fake-hub.js'

let root: string
let hub: FakeHub
let pkg: string
t.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'splash-serve-model-'))
  pkg = await synthFixture('tiny-hybrid', 'q4')
  const repo = join(root, 'repos', 'splash', 'tiny')
  await mkdir(join(root, 'repos', 'splash'), {recursive: true})
  await cp(pkg, repo, {recursive: true})
  hub = await startFakeHub()
  hub.repos.set('splash/tiny', repo)
})
t.teardown(async () => {
  await hub.close()
  await rm(root, {recursive: true, force: true})
})

const envFor = (name: string) => ({HF_HUB_CACHE: join(root, `cache-${name}`), SPLASH_DATA_DIR: join(root, `data-${name}`), HF_ENDPOINT: hub.url})

t.test('serves owner/repo from the hub, then from the cache with the hub gone', async t => {
  const env = envFor('hub')
  const server = await startServe(['--model', 'splash/tiny'], env)
  const models = await (await fetch(`${server.url}/v1/models`)).json()
  t.equal(models.data[0].id, 'splash/synth-tiny-hybrid')
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  // Offline: an endpoint nothing listens on.
  const offline = await startServe(['--model', 'splash/tiny'], {...env, HF_ENDPOINT: 'http://127.0.0.1:9'})
  const r = await fetch(`${offline.url}/v1/chat/completions`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify({messages: [{role: 'user', content: 'hi'}], max_tokens: 3})})
  t.equal(r.status, 200)
  offline.child.kill('SIGTERM')
  t.equal(await offline.exited, 0)
})

t.test('a local folder serves the same way', async t => {
  const server = await startServe(['--model', pkg], envFor('local'))
  t.equal((await fetch(`${server.url}/ready`)).status, 200)
  server.child.kill('SIGTERM')
  await server.exited
})

t.test('a plain checkpoint is refused with the way out', async t => {
  const ck = join(root, 'ckpt')
  await mkdir(ck, {recursive: true})
  await writeFile(join(ck, 'config.json'), JSON.stringify({architectures: ['Qwen3ForCausalLM']}))
  await writeFile(join(ck, 'model.safetensors'), '')
  const r = await runCli(['serve', '--port', '0', '--model', ck], envFor('ckpt'))
  t.not(r.code, 0)
  t.match(r.stderr, /not a Splash package.*splash package build/s)
})

t.test('a model that does not fit: the budget line by line, exit non-zero, nothing served', async t => {
  const r = await runCli(['serve', '--port', '0', '--model', pkg, '--max-memory', '1M'], envFor('fit'))
  t.not(r.code, 0)
  t.match(r.stderr + r.stdout, /the model does not fit/)
  t.match(r.stderr + r.stdout, /weights\s+\d/)
  t.equal((r.stderr + r.stdout).match(/Memory plan/g)?.length, 1, 'the plan is printed once')
  t.notMatch(r.stdout, /Ready/)
})
