// Real Claude Code, headless (`claude -p`), through `splash claude` against the real server: one turn completes.
import t from 'tap'
import {realTurn} from './real-agent.js'

t.test(
  'splash claude -p completes a turn against the served model',
  {timeout: 900_000},
  async t => realTurn(t, 'claude', 'npm ci (a devDependency)', ['-p', 'Reply with the single word: ready']),
)
