// Real opencode, headless (`opencode run`), through `splash opencode` against `splash serve` on packages/default:
// each file task ends with exactly the expected files.
import t from 'tap'
import {realFileTasks} from './real-agent.js'

t.test(
  'splash opencode run does file tasks on the default package',
  {timeout: 1_500_000},
  async t => realFileTasks(t, 'opencode', 'node scripts/install-agents.mjs (npm test runs it)', p => ['run', p]),
)
