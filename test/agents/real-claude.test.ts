// Real Claude Code, headless (`claude -p`), through `splash claude` against `splash serve` on packages/default:
// each file task ends with exactly the expected files (edits accepted, Bash allowed: the test runs unattended).
import t from 'tap'
import {realFileTasks} from './real-agent.js'

t.test(
  'splash claude -p does file tasks on the default package',
  {timeout: 1_500_000},
  async t => realFileTasks(t, 'claude', 'npm ci (a devDependency)', p => ['-p', p, '--permission-mode', 'acceptEdits', '--allowedTools', 'Bash']),
)
