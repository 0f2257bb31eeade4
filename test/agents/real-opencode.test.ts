// Real opencode, headless (`opencode run`), through `splash opencode` against the real server: one turn completes.
import t from 'tap'
import {realTurn} from './real-agent.js'

t.test(
  'splash opencode run completes a turn against the served model',
  {timeout: 900_000},
  async t => realTurn(t, 'opencode', 'node scripts/install-agents.mjs (npm test runs it)', ['run', 'Reply with the single word: ready']),
)
