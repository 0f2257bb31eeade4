// The engine's output cap (SPLASH_MAX_OUTPUT_TOKENS, like llama.cpp's --n-predict): a request never generates more
// tokens than the cap, ending with finish reason `length`; shorter requests are untouched.
import t from 'tap'
import {NativeModel} from '../../src/native/native-model.js'
import {Engine, outputTokenCap} from '../../src/engine/engine.js'
import {samplingParams} from '../../src/engine/sampling.js'
import {synthFixture} from '../helpers/packages.js'

t.test('outputTokenCap reads SPLASH_MAX_OUTPUT_TOKENS', async t => {
  t.equal(outputTokenCap({}), undefined)
  t.equal(outputTokenCap({SPLASH_MAX_OUTPUT_TOKENS: ''}), undefined)
  t.equal(outputTokenCap({SPLASH_MAX_OUTPUT_TOKENS: ' 48 '}), 48)
  for (const bad of ['0', '-3', '2.5', 'many', '1e400']) t.equal(outputTokenCap({SPLASH_MAX_OUTPUT_TOKENS: bad}), undefined, `${bad}: no cap`)
})

t.test('a capped engine stops every request at the cap', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const m = await NativeModel.open(dir, 256, {threads: 2, draft: false})
  t.teardown(() => m.close())
  const run = async (e: Engine, maxTokens: number) => {
    const out: number[] = []
    let reason = ''
    for await (const ev of e.generate({prompt: Int32Array.of(5, 17, 99), maxTokens, sampling: samplingParams({temperature: 0}), stopTokenIds: []})) {
      if (ev.type === 'token') out.push(ev.token)
      if (ev.type === 'done') reason = ev.reason
    }
    return {out, reason}
  }
  const free = await run(new Engine(m), 10)
  t.equal(free.out.length, 10, 'no cap: the request’s own limit')
  const capped = new Engine(m, {}, undefined, {maxOutputTokens: 4})
  t.equal(capped.maxOutputTokens, 4)
  const long = await run(capped, 10)
  t.same(long, {out: free.out.slice(0, 4), reason: 'length'}, 'cut at the cap, same tokens')
  const short = await run(capped, 2)
  t.same(short.out, free.out.slice(0, 2), 'a request under the cap keeps its own limit')
})
