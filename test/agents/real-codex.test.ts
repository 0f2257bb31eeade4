// Real Codex CLI, headless (`codex exec`), through `splash codex` against the real server: one turn completes.
import t from 'tap'
import {realTurn} from './real-agent.js'

t.test(
  'splash codex exec completes a turn against the served model',
  {timeout: 900_000},
  async t => realTurn(t, 'codex', 'npm ci (a devDependency)', ['exec', '--skip-git-repo-check', 'Reply with the single word: ready']),
)
