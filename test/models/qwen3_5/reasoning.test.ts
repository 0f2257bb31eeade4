// Reasoning / content split at </think>, with the prompt's or the model's own <think>, for every split.
import t from 'tap'
import {ReasoningParser, promptOpensThinking, type ReasoningEvent} from '../../../models/qwen3_5/reasoning.js'
import {charSplit, randomSplits, twoWaySplits} from '../helpers/splits.js'

function run(startInReasoning: boolean, pieces: string[]) {
  const p = new ReasoningParser(startInReasoning)
  const events: ReasoningEvent[] = []
  for (const piece of pieces) events.push(...p.push(piece))
  events.push(...p.finish())
  let reasoning = ''
  let content = ''
  let order = ''
  for (const e of events) {
    if (e.text === '') throw new Error('empty event')
    if (e.type === 'reasoning') reasoning += e.text
    else content += e.text
    if (order.at(-1) !== e.type[0]) order += e.type[0]
  }
  return {reasoning, content, order}
}

const cases: {start: boolean; text: string; reasoning: string; content: string}[] = [
  {start: true, text: 'Let me think.\nStep 2.\n</think>\n\nThe answer is 4.', reasoning: 'Let me think.\nStep 2.', content: 'The answer is 4.'},
  {start: true, text: 'no end yet, cut by max_tokens\n', reasoning: 'no end yet, cut by max_tokens', content: ''},
  {start: true, text: '<think>\nrepeated open\n</think>\n\nok', reasoning: 'repeated open', content: 'ok'},
  {start: false, text: '<think>\nmodel opened it 😀\n</think>\n\n<tool_call>x', reasoning: 'model opened it 😀', content: '<tool_call>x'},
  {start: false, text: '  <think>\n\n</think>\n\nempty think', reasoning: '', content: 'empty think'},
  {start: false, text: 'Direct answer with a <think> inside and </think> too', reasoning: '', content: 'Direct answer with a <think> inside and </think> too'},
  {start: false, text: '<thinking about it', reasoning: '', content: '<thinking about it'},
  {start: true, text: 'a </thin b\n\nc</think>d </think> e', reasoning: 'a </thin b\n\nc', content: 'd </think> e'},
  {start: true, text: '\n</think>\n\n', reasoning: '', content: ''},
]

t.test('splits reasoning from content, for every split of the stream', async t => {
  for (const c of cases) {
    const whole = run(c.start, [c.text])
    t.equal(whole.reasoning, c.reasoning, `reasoning of ${JSON.stringify(c.text)}`)
    t.equal(whole.content, c.content, `content of ${JSON.stringify(c.text)}`)
    t.notMatch(whole.order, /cr/, 'reasoning never follows content')
    const bad: string[][] = []
    for (const pieces of [...twoWaySplits(c.text), ...randomSplits(c.text, 100, 3), charSplit(c.text)]) {
      const r = run(c.start, pieces)
      if (r.reasoning !== whole.reasoning || r.content !== whole.content) bad.push(pieces)
    }
    t.same(bad.slice(0, 3), [], `${bad.length} bad splits`)
  }
})

t.test('reasoning streams before </think> arrives', async t => {
  const p = new ReasoningParser(true)
  t.same(p.push('Thinking hard'), [{type: 'reasoning', text: 'Thinking hard'}])
  t.ok(p.inReasoning)
  t.same(p.push('\n</thi'), [])
  t.same(p.push('nk>\n\nHi'), [{type: 'content', text: 'Hi'}])
  t.notOk(p.inReasoning)
})

t.test('promptOpensThinking', async t => {
  t.ok(promptOpensThinking('<|im_start|>assistant\n<think>\n'))
  t.notOk(promptOpensThinking('<|im_start|>assistant\n<think>\n\n</think>\n\n'))
  t.notOk(promptOpensThinking('<|im_start|>assistant\n'))
  t.notOk(promptOpensThinking('<|im_start|>user\nwhat is <think>?<|im_end|>\n<|im_start|>assistant\n'))
})
