// The tests, benches and helpers are TypeScript strict too: tsx runs them without checking types, so this runs the
// compiler over the whole tree (tsconfig.test.json: the sources plus test/ and bench/, no output) and fails on any error.
import t from 'tap'
import {spawnSync} from 'node:child_process'
import path from 'node:path'
import {root} from './helpers/cli.js'

t.test('tsc --noEmit over src, models, plugins, test and bench', {timeout: 600_000}, async t => {
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  const res = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.test.json')], {cwd: root, encoding: 'utf8'})
  const errors = (res.stdout + res.stderr).split('\n').filter(l => /error TS\d+/.test(l))
  t.same(errors, [], 'no type errors')
  t.equal(res.status, 0, 'tsc exit code')
})
