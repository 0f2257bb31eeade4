// loadModel's step token budget: 512 tokens per step on the host, 2048 on a device backend, SPLASH_TOKEN_BUDGET
// for diagnosis; the engine it builds chunks a long prefill by it.
import {mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'
import t from 'tap'
import {gatherShare, loadModel, stepTokenBudget} from '../../src/serving/load-model.js'
import {readManifest} from '../../src/package/manifest.js'
import {samplingParams} from '../../src/engine/sampling.js'
import {synthFixture} from '../helpers/packages.js'

t.test('stepTokenBudget: host, device, override', async t => {
  t.equal(stepTokenBudget(false, {}), 512)
  t.equal(stepTokenBudget(true, {}), 2048)
  t.equal(stepTokenBudget(false, {SPLASH_TOKEN_BUDGET: '1024'}), 1024)
  t.equal(stepTokenBudget(true, {SPLASH_TOKEN_BUDGET: ' 300 '}), 300)
  t.equal(stepTokenBudget(true, {SPLASH_TOKEN_BUDGET: '4'}), 16, 'at least 16 (a verify block)')
  for (const bad of ['', '0', '-5', '1e3', 'many']) t.equal(stepTokenBudget(true, {SPLASH_TOKEN_BUDGET: bad}), 2048, `ignored: "${bad}"`)
})

t.test('gatherShare: on the host, off on a device backend, SPLASH_GATHER overrides', async t => {
  t.equal(gatherShare(false, {}), 1 / 8, 'an eighth of a one-sequence decode step on the host')
  t.equal(gatherShare(true, {}), 0, 'not measured on a device: off')
  t.equal(gatherShare(false, {SPLASH_GATHER: 'off'}), 0)
  t.equal(gatherShare(true, {SPLASH_GATHER: '1'}), 1 / 8)
  t.equal(gatherShare(false, {SPLASH_GATHER: 'sometimes'}), 1 / 8, 'a value that does not parse: the default')
})

t.test('the engine loadModel builds chunks a prefill by the budget', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const work = await mkdtemp(path.join(tmpdir(), 'splash-budget-'))
  const saved = {trace: process.env.SPLASH_TRACE_STEPS, budget: process.env.SPLASH_TOKEN_BUDGET}
  const restore = (k: 'SPLASH_TRACE_STEPS' | 'SPLASH_TOKEN_BUDGET', v: string | undefined) => {
    if (v === undefined) delete process.env[k]
    else process.env[k] = v
  }
  t.teardown(async () => {
    restore('SPLASH_TRACE_STEPS', saved.trace)
    restore('SPLASH_TOKEN_BUDGET', saved.budget)
    await rm(work, {recursive: true, force: true})
  })
  const manifest = await readManifest(dir)
  for (const budget of [undefined, '100']) {
    const file = path.join(work, `steps-${budget ?? 'default'}.txt`)
    process.env.SPLASH_TRACE_STEPS = file
    restore('SPLASH_TOKEN_BUDGET', budget)
    const loaded = await loadModel({dir, manifest, maxContext: 2048, log: () => {}, threads: 2})
    try {
      const prompt = Int32Array.from({length: 700}, (_, i) => 5 + (i % 200))
      for await (const ev of loaded.engine.generate({prompt, maxTokens: 1, sampling: samplingParams({temperature: 0}), stopTokenIds: []}))
        void ev
      // the last step's trace line is written after its token reaches the client (the prefix cache saves between)
      await loaded.engine.idle()
    } finally {
      loaded.model.close()
    }
    const steps = (await readFile(file, 'utf8')).trim().split('\n').map(l => Number(/ tokens=(\d+) /.exec(l)?.[1]))
    const most = budget ? Number(budget) : 512 // this machine's backend is the CPU
    t.ok(steps.every(n => n <= most), `${budget ?? 'default'}: every step within ${most} tokens (${steps.join(', ')})`)
    t.equal(steps[0], most, 'the first chunk fills the budget')
    t.equal(steps.reduce((a, b) => a + b, 0), 700, 'every prompt token in some step')
  }
})
