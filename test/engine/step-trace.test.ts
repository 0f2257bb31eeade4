// SPLASH_TRACE_STEPS: the engine appends one line per step to the file named, with each phase's wall time and
// what the step computed; unset, nothing is written.
import {mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'
import t from 'tap'
import {NativeModel} from '../../src/native/native-model.js'
import {Engine} from '../../src/engine/engine.js'
import {samplingParams} from '../../src/engine/sampling.js'
import {StepTrace} from '../../src/engine/step-trace.js'
import {synthFixture} from '../helpers/packages.js'

t.test('fromEnv: only with a file name', async t => {
  t.equal(StepTrace.fromEnv({}), undefined)
  t.equal(StepTrace.fromEnv({SPLASH_TRACE_STEPS: '  '}), undefined)
  t.ok(StepTrace.fromEnv({SPLASH_TRACE_STEPS: '/tmp/x'}))
})

t.test('an engine run writes one line per step: phases and tokens', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const m = await NativeModel.open(dir, 256, {threads: 2, draft: false})
  const work = await mkdtemp(path.join(tmpdir(), 'splash-trace-'))
  const file = path.join(work, 'steps.txt')
  const before = process.env.SPLASH_TRACE_STEPS
  process.env.SPLASH_TRACE_STEPS = file
  t.teardown(async () => {
    if (before === undefined) delete process.env.SPLASH_TRACE_STEPS
    else process.env.SPLASH_TRACE_STEPS = before
    m.close()
    await rm(work, {recursive: true, force: true})
  })
  const prompt = Int32Array.from({length: 40}, (_, i) => 5 + i)
  let generated = 0
  for await (const ev of new Engine(m).generate({prompt, maxTokens: 6, sampling: samplingParams({temperature: 0}), stopTokenIds: []}))
    if (ev.type === 'token') generated++
  t.equal(generated, 6)
  const lines = (await readFile(file, 'utf8')).trim().split('\n')
  const re = /^\S+ total=([\d.]+)ms schedule=([\d.]+) step=([\d.]+) post=([\d.]+) save=([\d.]+) items=(\d+) tokens=(\d+) verify=(\d+)$/
  let tokens = 0
  for (const line of lines) {
    const m = re.exec(line)
    t.ok(m, `well-formed: ${line}`)
    if (!m) continue
    const [total, ...phases] = m.slice(1, 6).map(Number)
    t.ok(Math.abs(total - phases.reduce((a, b) => a + b, 0)) < 0.05, 'the phases add up to the total (to rounding)')
    t.equal(Number(m[6]), 1)
    tokens += Number(m[7])
  }
  // the prompt, then each generated token but the last is fed back
  t.equal(tokens, prompt.length + generated - 1, 'every computed token is in some step')
})
