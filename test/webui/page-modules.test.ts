// The page's pure modules, in Node: the server-sent-event splitter, the OpenAI content parts, the status line's numbers.
import t from 'tap'
// @ts-expect-error plain browser JS without types
import {SseParser} from '../../webui/js/api.js'
// @ts-expect-error plain browser JS without types
import {userContent, kindOf} from '../../webui/js/attachments.js'
// @ts-expect-error plain browser JS without types
import {statsOf} from '../../webui/js/stats.js'
// @ts-expect-error plain browser JS without types
import {effortsOf, STANDARD_EFFORTS} from '../../webui/js/efforts.js'

t.test('SseParser joins events split anywhere', async t => {
  const stream = 'data: {"a":1}\n\n: keep-alive\n\ndata: {"b":2}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n'
  for (let cut = 1; cut < stream.length; cut++) {
    const p = new SseParser()
    const out = [...p.push(stream.slice(0, cut)), ...p.push(stream.slice(cut)), ...p.flush()]
    t.same(out, ['{"a":1}', '{"b":2}', 'line1\nline2', '[DONE]'], `cut at ${cut}`)
  }
  const p = new SseParser()
  const bytes = [...stream].map(ch => p.push(ch)).flat()
  t.same([...bytes, ...p.flush()], ['{"a":1}', '{"b":2}', 'line1\nline2', '[DONE]'], 'one character at a time')
  const tail = new SseParser()
  t.same([...tail.push('data: {"c":3}'), ...tail.flush()], ['{"c":3}'], 'a last event without its blank line')
})

t.test('user content: a string, or text and file parts', async t => {
  t.equal(userContent('hi', []), 'hi')
  t.equal(userContent('hi', [{kind: 'image', name: 'a.png', dropped: true}]), 'hi', 'attachments whose data was dropped are left out')
  t.same(
    userContent('look', [
      {kind: 'image', name: 'a.png', dataUrl: 'data:image/png;base64,AAAA'},
      {kind: 'pdf', name: 'b.pdf', dataUrl: 'data:application/pdf;base64,JVBE'},
    ]),
    [
      {type: 'text', text: 'look'},
      {type: 'image_url', image_url: {url: 'data:image/png;base64,AAAA'}},
      {type: 'file', file: {filename: 'b.pdf', file_data: 'data:application/pdf;base64,JVBE'}},
    ],
  )
  t.same(userContent('', [{kind: 'image', name: 'a.png', dataUrl: 'data:image/png;base64,AAAA'}]), [
    {type: 'image_url', image_url: {url: 'data:image/png;base64,AAAA'}},
  ], 'no empty text part')
  t.equal(kindOf({type: 'image/webp', name: 'x.webp'}), 'image')
  t.equal(kindOf({type: '', name: 'scan.PDF'}), 'pdf')
  t.equal(kindOf({type: 'text/plain', name: 'a.txt'}), null)
})

t.test('status line numbers: what usage and timings report', async t => {
  const usage = {prompt_tokens: 120, completion_tokens: 80, prompt_tokens_details: {cached_tokens: 64}}
  t.same(statsOf(usage, {predicted_per_second: 41.5, draft_acceptance_length: 2.4}), {
    promptTokens: 120, completionTokens: 80, cachedTokens: 64, tokensPerSecond: 41.5, acceptanceLength: 2.4,
  })
  t.same(statsOf(null, {prompt_n: 10, predicted_n: 5, cache_n: 3, predicted_per_second: 9, draft_n: 8, draft_n_accepted: 6}), {
    promptTokens: 10, completionTokens: 5, cachedTokens: 3, tokensPerSecond: 9, acceptanceRate: 0.75,
  }, 'llama.cpp draft counters give an acceptance rate')
  t.same(statsOf({prompt_tokens: 5, completion_tokens: 11}, null, {first: 1000, end: 2000}), {
    promptTokens: 5, completionTokens: 11, tokensPerSecond: 10, estimated: true,
  }, 'no timings: tokens/s from the page clock, marked as an estimate')
  t.same(statsOf(null, null, {}), {}, 'nothing reported, nothing shown')
  t.same(statsOf({prompt_tokens: 'x'}, {predicted_per_second: NaN}), {}, 'non-numbers are ignored')
})

t.test('reasoning efforts: what the package declares, else the standard list', async t => {
  t.same(effortsOf(null), {list: STANDARD_EFFORTS, default: null})
  t.same(effortsOf({id: 'm'}), {list: ['none', 'low', 'medium', 'high', 'xhigh'], default: null})
  t.same(effortsOf({reasoning_efforts: ['none', 'high'], reasoning_effort_default: 'high'}), {list: ['none', 'high'], default: 'high'})
  t.same(effortsOf({reasoning_efforts: {none: 0, low: 1024}}), {list: ['none', 'low'], default: null}, 'the manifest shape (name → budget)')
  t.same(effortsOf({reasoning_efforts: []}), {list: STANDARD_EFFORTS, default: null})
})
