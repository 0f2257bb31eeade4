// Real Claude Code, headless (`claude -p`), through `splash claude` against the real server: one turn completes.
// Skipped, with the reason, when Claude Code is not installed.
import t from 'tap'
import {realTurn, skipReason} from './real-agent.js'

t.test(
  'splash claude -p completes a turn against the served model',
  {skip: skipReason('claude', 'npm install -g @anthropic-ai/claude-code'), timeout: 900_000},
  async t => realTurn(t, 'claude', ['-p', 'Reply with the single word: ready']),
)
