// Stop strings: never emitted, found across any split, and only a possible stop prefix is held back.
import t from 'tap'
import {StopStringMatcher} from '../../src/chat/stop-strings.js'
import {randomSplits, twoWaySplits} from '../models/helpers/splits.js'

function run(stops: string[], pieces: string[]) {
  const m = new StopStringMatcher(stops)
  let text = ''
  let stopped: {stop: string; offset: number} | undefined
  for (const piece of pieces) {
    const r = m.push(piece)
    text += r.text
    stopped ??= r.stopped
  }
  if (!stopped) text += m.flush()
  return {text, stopped}
}

const cases: {stops: string[]; text: string; expect: string; stop?: string}[] = [
  {stops: ['END'], text: 'hello END world', expect: 'hello ', stop: 'END'},
  {stops: ['END'], text: 'hello EN world', expect: 'hello EN world'},
  {stops: ['END'], text: 'hello EN', expect: 'hello EN'},
  {stops: ['\n\n', 'Observation:'], text: 'a\nb Observation: c\n\nd', expect: 'a\nb ', stop: 'Observation:'},
  {stops: ['abcd', 'bc'], text: 'xabcd', expect: 'xa', stop: 'bc'},
  {stops: ['aab'], text: 'aaab', expect: 'a', stop: 'aab'},
  {stops: ['ab', 'b'], text: 'xab', expect: 'x', stop: 'ab'},
  {stops: ['😀'], text: 'smile 😀 now', expect: 'smile ', stop: '😀'},
  {stops: ['你好'], text: '说你好啊', expect: '说', stop: '你好'},
  {stops: [], text: 'nothing stops this', expect: 'nothing stops this'},
]

t.test('every two-way split and random splits give the unsplit result', async t => {
  for (const c of cases) {
    const whole = run(c.stops, [c.text])
    t.equal(whole.text, c.expect, `whole: ${JSON.stringify(c.text)}`)
    t.equal(whole.stopped?.stop, c.stop)
    if (whole.stopped) t.equal(whole.stopped.offset, c.expect.length, 'offset is where the stop string began')
    const bad: string[][] = []
    for (const pieces of [...twoWaySplits(c.text), ...randomSplits(c.text, 200, 7)]) {
      const r = run(c.stops, pieces)
      if (r.text !== whole.text || r.stopped?.stop !== whole.stopped?.stop || r.stopped?.offset !== whole.stopped?.offset) bad.push(pieces)
    }
    t.same(bad, [], `splits of ${JSON.stringify(c.text)}`)
  }
})

t.test('holds back only the longest suffix that could start a stop string', async t => {
  const m = new StopStringMatcher(['</answer>', 'STOP'])
  t.equal(m.push('value </ans').text, 'value ')
  t.equal(m.push('wer is ST').text, '</answer is ')
  t.equal(m.push('ATE').text, 'STATE')
  t.equal(m.push('x <').text, 'x ')
  t.equal(m.flush(), '<')
})

t.test('after a stop, nothing more is emitted', async t => {
  const m = new StopStringMatcher(['STOP'])
  const r = m.push('aSTOPb')
  t.equal(r.text, 'a')
  t.same(r.stopped, {stop: 'STOP', offset: 1})
  t.ok(m.stopped)
  t.equal(m.push('more').text, '')
  t.equal(m.flush(), '')
})
