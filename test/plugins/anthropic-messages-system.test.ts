// Claude Code sends system messages inside `messages` (mid-conversation system beta); they become system turns.
import t from 'tap'
import {toMessages} from '../../plugins/anthropic-messages/lib/translate.js'

t.test('a system message inside messages becomes a system turn in place', async t => {
  const out = toMessages({
    system: [{type: 'text', text: 'You are helpful.'}],
    messages: [
      {role: 'user', content: 'hi'},
      {role: 'system', content: [{type: 'text', text: 'be brief'}]},
      {role: 'user', content: 'what is 2+2'},
    ],
  } as never)
  t.same(
    out.map(m => [m.role, m.content]),
    [
      ['system', 'You are helpful.'],
      ['user', 'hi'],
      ['system', 'be brief'],
      ['user', 'what is 2+2'],
    ],
  )
})
