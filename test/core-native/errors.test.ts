// Bad input to the native core is an error with a code, never a crash.
import t from 'tap'
import {native, NativeError, addonPath} from '../../src/native/native.js'
import {SplashError} from '../../src/errors.js'
import {writeTinyPackage} from './helpers/tiny-package.js'
import {writeFile, mkdir} from 'node:fs/promises'
import {spawnSync} from 'node:child_process'
import path from 'node:path'

const root = t.testdir({})

t.test('openModel failures', async (t) => {
  await t.rejects(native.openModel(`${root}/missing`), {code: 'io_error'})
  await mkdir(`${root}/plain`, {recursive: true})
  await writeFile(`${root}/plain/config.json`, '{}')
  await t.rejects(native.openModel(`${root}/plain`), {code: 'not_a_package'})
  await mkdir(`${root}/badjson`, {recursive: true})
  await writeFile(`${root}/badjson/splash.json`, '{"format": 1, ')
  await t.rejects(native.openModel(`${root}/badjson`), {code: 'bad_package'})
  await mkdir(`${root}/badfam`, {recursive: true})
  await writeFile(`${root}/badfam/splash.json`, JSON.stringify({format: 1, family: 'llama', config: {}, weights: {files: ['x']}}))
  await t.rejects(native.openModel(`${root}/badfam`), {code: 'unsupported'})
  // a package whose safetensors file is truncated
  const pkg = await writeTinyPackage(`${root}/trunc`, 'hybrid', 'q4', 3)
  const {truncate} = await import('node:fs/promises')
  await truncate(`${pkg.dir}/model.safetensors`, 1000)
  await t.rejects(native.openModel(pkg.dir), {code: 'bad_package'})
  await t.rejects(native.openModel(42 as unknown as string), {code: 'invalid_argument'})
  await t.rejects(native.openModel(pkg.dir, {threads: -1}), {code: 'invalid_argument'})
  const err = await native.openModel(`${root}/missing`).catch((e: unknown) => e)
  t.ok(err instanceof NativeError && err instanceof SplashError, 'a NativeError is a SplashError')
})

t.test('sequence and step validation', async (t) => {
  const pkg = await writeTinyPackage(`${root}/ok`, 'hybrid', 'q4', 5)
  const h = await native.openModel(pkg.dir, {threads: 2})
  const seq = native.createSequence(h, {maxLength: 8})
  const step = (items: unknown) => native.step(h, items as never)
  const toks = (a: number[]) => Int32Array.from(a)
  await t.rejects(step([{seq, tokens: toks([256])}]), {code: 'bad_token'})
  await t.rejects(step([{seq, tokens: toks([-1])}]), {code: 'bad_token'})
  await t.rejects(step([{seq: 999, tokens: toks([1])}]), {code: 'unknown_sequence'})
  await t.rejects(step([{seq, tokens: toks([1, 2, 3, 4, 5, 6, 7, 8, 9])}]), {code: 'too_long'})
  await t.rejects(step([{seq, tokens: toks([])}]), {code: 'invalid_argument'})
  await t.rejects(step([{seq, tokens: [1, 2]}]), {code: 'invalid_argument'})
  await t.rejects(step([{seq, tokens: Float32Array.from([1])}]), {code: 'invalid_argument'})
  await t.rejects(step([{seq, tokens: toks([1]), logits: 'some'}]), {code: 'invalid_argument'})
  await t.rejects(step([{seq, tokens: toks([1])}, {seq, tokens: toks([2])}]), {code: 'invalid_argument'})
  await t.rejects(step([]), {code: 'invalid_argument'})
  await t.rejects(step('x'), {code: 'invalid_argument'})
  await t.rejects(step([null]), {code: 'invalid_argument'})
  t.equal(native.sequenceLength(h, seq), 0, 'failed steps change nothing')
  // a sequence in flight cannot join another step or be freed
  const running = step([{seq, tokens: toks([1, 2, 3]), logits: 'last'}])
  await t.rejects(step([{seq, tokens: toks([4])}]), {code: 'sequence_busy'})
  t.throws(() => native.freeSequence(h, seq), {code: 'sequence_busy'})
  const [out] = (await running).map(r => r.logits)
  t.equal(out!.length, 256)
  await t.rejects(step([{seq, tokens: toks([1, 2, 3, 4, 5, 6])}]), {code: 'too_long'})
  t.throws(() => native.createSequence(h, {maxLength: 0}), {code: 'invalid_argument'})
  t.throws(() => native.createSequence(h, {maxLength: 1e12}), {code: 'invalid_argument'})
  t.throws(() => native.createSequence(h, {} as never), {code: 'invalid_argument'})
  t.throws(() => native.truncateSequence(h, seq, 99), {code: 'invalid_argument'})
  t.throws(() => native.freeSequence(h, 12345), {code: 'unknown_sequence'})
  native.freeSequence(h, seq)
  t.throws(() => native.freeSequence(h, seq), {code: 'unknown_sequence'})
  native.closeModel(h)
  t.throws(() => native.modelInfo(h), {code: 'unknown_model'})
  t.throws(() => native.createSequence(h, {maxLength: 4}), {code: 'unknown_model'})
  await t.rejects(step([{seq, tokens: toks([1])}]), {code: 'unknown_model'})
  t.throws(() => native.closeModel(h), {code: 'unknown_model'})
})

// The addon refuses an overlong step before it reaches the engine (above); the engine's own check covers its other
// callers (the benches, the GPU tests), through the kernel test binary built beside the addon.
t.test('the engine refuses a step past maxLength without the addon', async (t) => {
  const pkg = await writeTinyPackage(`${root}/guard`, 'hybrid', 'q4', 11)
  const exe = path.join(path.dirname(addonPath), '..', 'splash_kernel_test')
  const r = spawnSync(exe, ['guard', pkg.dir], {encoding: 'utf8', timeout: 120_000})
  t.equal(r.status, 0, `${r.stdout}${r.stderr}`)
  t.match(r.stdout, /^guard ok$/m)
})

t.test('closing a model while a step runs lets the step finish', async (t) => {
  const pkg = await writeTinyPackage(`${root}/close`, 'moe', 'q4', 9)
  const h = await native.openModel(pkg.dir)
  const seq = native.createSequence(h, {maxLength: 64})
  const running = native.step(h, [{seq, tokens: Int32Array.from({length: 50}, (_, i) => i), logits: 'all'}])
  native.closeModel(h)
  const [out] = (await running).map(r => r.logits)
  t.equal(out!.length, 50 * 256)
})
