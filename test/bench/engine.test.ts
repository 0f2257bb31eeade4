// `engineBench` end to end on a tiny synthetic package: the rounds of copy measurements and decode steps, and how
// the reported fraction of bandwidth is made from them. No assertion on speed.
import t from 'tap'
import {engineBench} from '../../src/bench/engine.js'
import {stats} from '../../src/bench/common.js'
import {synthFixture} from '../helpers/packages.js'

t.test('engine bench: decode in rounds, each against its own copy measurement', async t => {
  const dir = await synthFixture('tiny-hybrid')
  const lines: string[] = []
  const r = await engineBench({dir, threads: 1, prefillTokens: 32, decodeSteps: 10, runs: 1, log: l => lines.push(l)})
  t.equal(r.decode.steps, 10)
  t.equal(r.decode.secondsPerStep.length, 10, 'every timed step is kept')
  t.equal(r.decode.roundFractions.length, 4)
  t.ok(r.decode.roundFractions.every(x => Number.isFinite(x) && x > 0))
  t.equal(r.decode.bandwidthFraction, stats(r.decode.roundFractions).median, 'the reported fraction is the median round')
  t.ok(r.memcpyGBps > 0 && r.matvecGBps > 0)
  t.equal(lines.filter(l => /^ {2}round \d: memcpy/.test(l)).length, 4)
  t.equal(r.prefill.tokens, 32)
  t.ok(r.prefill.flops > 0 && r.prefill.peakFlopsPerSecond > 0)
})
