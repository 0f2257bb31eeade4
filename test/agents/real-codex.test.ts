// Real Codex CLI, headless (`codex exec`), through `splash codex` against the real server: one turn completes.
// Skipped, with the reason, when Codex is not installed.
import t from 'tap'
import {realTurn, skipReason} from './real-agent.js'

t.test(
  'splash codex exec completes a turn against the served model',
  {skip: skipReason('codex', 'npm install -g @openai/codex'), timeout: 900_000},
  async t => realTurn(t, 'codex', ['exec', '--skip-git-repo-check', 'Reply with the single word: ready']),
)
