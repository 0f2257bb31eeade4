// The package commands end to end through the built CLI (node bin/run.js, i.e. dist/).
import t from 'tap'
import {spawn} from 'node:child_process'
import {mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {startFakeHub} from '../fixtures/package/fake-hub.js'
import {flushFixtures, writeFixture} from '../fixtures/package/checkpoints.js'

const root = mkdtempSync(join(tmpdir(), 'splash-cli-'))
const baseEnv = {...process.env, SPLASH_DATA_DIR: join(root, 'data'), HF_HUB_CACHE: join(root, 'cache')}

/** Runs the CLI asynchronously (the fake hub lives in this process and must keep answering). */
function splash(args: string[], env: NodeJS.ProcessEnv = baseEnv): Promise<{code: number | null; out: string; err: string}> {
  return new Promise(resolve => {
    const child = spawn(process.execPath, ['bin/run.js', ...args], {env})
    let out = ''
    let err = ''
    child.stdout.on('data', d => (out += d))
    child.stderr.on('data', d => (err += d))
    child.on('close', code => resolve({code, out, err}))
  })
}

t.test('package synth, verify, tamper', async t => {
  const out = join(root, 'tiny')
  const s = await splash(['package', 'synth', '--preset', 'tiny-hybrid', '--out', out])
  t.equal(s.code, 0, s.err)
  t.match(s.out, /wrote splash\/synth-tiny-hybrid \(4 layers, q4/)
  const v = await splash(['package', 'verify', out])
  t.equal(v.code, 0, v.err)
  t.match(v.out, /^ok: splash\/synth-tiny-hybrid: 4 files/)
  writeFileSync(join(out, 'chat_template.jinja'), 'changed')
  const bad = await splash(['package', 'verify', out])
  t.equal(bad.code, 1)
  t.match(bad.err, /bad: chat_template\.jinja has 7 bytes, the manifest says \d+/)
  const unknown = await splash(['package', 'synth', '--preset', 'nope', '--out', out])
  t.equal(unknown.code, 2)
  t.match(unknown.err, /^Error: .*nope/)
})

t.test('package synth --kernels cuda-sm90, package kernels (nvcc)', async t => {
  const out = join(root, 'tiny-kernels')
  const s = await splash(['package', 'synth', '--preset', 'tiny-hybrid', '--out', out, '--kernels', 'cuda-sm90'])
  t.equal(s.code, 0, s.err)
  t.match(s.err, /wrote kernels\/cuda-sm90\.fatbin \(\d+ bytes, ABI \d+\)/)
  const v = await splash(['package', 'verify', out])
  t.equal(v.code, 0, v.err)
  t.match(v.out, /^ok: splash\/synth-tiny-hybrid: 5 files/)
  const k = await splash(['package', 'kernels', out])
  t.equal(k.code, 0, k.err)
  t.match(k.out, /added kernels\/cuda-sm90\.fatbin \(cuda sm_90, ABI \d+\) to splash\/synth-tiny-hybrid/)
  const missing = await splash(['package', 'kernels', out, '--nvcc', join(root, 'no-nvcc')])
  t.equal(missing.code, 1)
  t.match(missing.err, /needs the CUDA compiler/)
})

t.test('package build', async t => {
  const src = join(root, 'ckpt')
  writeFixture(src, {kind: 'dense', names: 'vl'})
  await flushFixtures()
  const b = await splash(['package', 'build', src, '--out', join(root, 'built'), '--quant', 'q8', '--name', 'me/tiny'])
  t.equal(b.code, 0, b.err)
  t.match(b.out, /built me\/tiny \(qwen3_5, q8/)
  const notPkg = await splash(['package', 'verify', src])
  t.equal(notPkg.code, 1)
  t.match(notPkg.err, /^Error: .*is not a Splash package.*splash package build/)
  writeFileSync(join(src, 'config.json'), JSON.stringify({architectures: ['GPT2LMHeadModel']}))
  const unsupported = await splash(['package', 'build', src, '--out', join(root, 'x')])
  t.equal(unsupported.code, 1)
  t.match(unsupported.err, /^Error: unsupported architecture GPT2LMHeadModel; supported: /)
})

t.test('pull, list, verify owner/repo', async t => {
  const hub = await startFakeHub()
  t.teardown(() => hub.close())
  const pkg = join(root, 'hubpkg')
  t.equal((await splash(['package', 'synth', '--preset', 'tiny-moe', '--out', pkg, '--name', 'acme/moe'])).code, 0)
  hub.repos.set('acme/moe', pkg)
  const env = {...baseEnv, HF_ENDPOINT: hub.url}
  const p = await splash(['pull', 'acme/moe'], env)
  t.equal(p.code, 0, p.err)
  t.match(p.out, /^acme\/moe: .* verified in .*models--acme--moe\/snapshots\/[0-9a-f]{40}\n$/, 'stdout holds only the result')
  t.match(p.err, /acme\/moe \[#+\] .*\/s {2}ETA/, 'progress on stderr')
  const l = await splash(['list'], env)
  t.equal(l.code, 0)
  t.match(l.out, /NAME\s+SIZE\s+FROM\s+PATH\n/)
  t.match(l.out, /acme\/moe\s+\d.*acme\/moe\s+\S*models--acme--moe/)
  const v = await splash(['package', 'verify', 'acme/moe'], env)
  t.equal(v.code, 0, v.err)
  const missing = await splash(['pull', 'acme/none'], env)
  t.equal(missing.code, 1)
  t.match(missing.err, /^Error: acme\/none was not found on .* \(404\)\n$/)
})

t.test('package export --hf', async t => {
  const pkg = join(root, 'export-src')
  t.equal((await splash(['package', 'synth', '--preset', 'tiny-hybrid', '--out', pkg])).code, 0)
  const out = join(root, 'export-hf')
  const r = await splash(['package', 'export', '--hf', out, pkg])
  t.equal(r.code, 0, r.err)
  t.match(r.out, /^wrote .*export-hf \(\d+ tensors, [\d.]+ MB, with the DFlash draft in draft\/\); serve commands in .*README\.md/)
  const both = await splash(['package', 'export', '--hf', out, '--gguf', join(root, 'x.gguf'), pkg])
  t.equal(both.code, 2)
  t.match(both.err, /^Error: .*(--gguf|--hf)/)
  const type = await splash(['package', 'export', '--hf', out, '--type', 'q8_0', pkg])
  t.equal(type.code, 1)
  t.match(type.err, /^Error: --type applies to --gguf only/)
})
