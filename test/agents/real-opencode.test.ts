// Real opencode, headless (`opencode run`), through `splash opencode` against the real server: one turn completes.
// Skipped, with the reason, when opencode is not installed.
import t from 'tap'
import {realTurn, skipReason} from './real-agent.js'

t.test(
  'splash opencode run completes a turn against the served model',
  {skip: skipReason('opencode', 'npm install -g opencode-ai'), timeout: 900_000},
  async t => realTurn(t, 'opencode', ['run', 'Reply with the single word: ready']),
)
