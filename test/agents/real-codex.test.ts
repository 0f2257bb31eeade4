// Real Codex CLI, headless (`codex exec`, workspace-write sandbox), through `splash codex` against `splash serve`
// on packages/default: each file task ends with exactly the expected files.
import t from 'tap'
import {realFileTasks} from './real-agent.js'

t.test(
  'splash codex exec does file tasks on the default package',
  {timeout: 1_500_000},
  async t => realFileTasks(t, 'codex', 'npm ci (a devDependency)', p => ['exec', '--skip-git-repo-check', '--sandbox', 'workspace-write', p]),
)
