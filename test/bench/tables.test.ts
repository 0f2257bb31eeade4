// docs/benchmarks.md's tables are generated from bench/results/*.json: the page must hold what the script writes now,
// and every record must say what was run, where, on which tree and when.
import {test} from 'tap'
import {readFileSync, readdirSync} from 'node:fs'
import {join} from 'node:path'
import {DOC, RESULTS_DIR, renderTables, withTables, type BenchResults} from '../../bench/render-tables.js'

test('docs/benchmarks.md holds the tables bench/results/*.json make (npm run bench:tables)', async t => {
  const page = readFileSync(DOC, 'utf8')
  t.equal(page, withTables(page, renderTables()), 'the generated part is current')
})

test('every record names its command, machine, tree or recording commit, and date', async t => {
  const files = readdirSync(RESULTS_DIR).filter(f => f.endsWith('.json'))
  t.ok(files.length > 0, 'there are results')
  for (const f of files) {
    const r = JSON.parse(readFileSync(join(RESULTS_DIR, f), 'utf8')) as BenchResults
    t.ok(r.title && r.records.length > 0, `${f}: a title and records`)
    for (const [i, x] of r.records.entries()) {
      const where = `${f} record ${i}`
      t.ok(x.measurement && x.command && x.result && x.machine, `${where}: measurement, command, result, machine`)
      t.ok(x.commit === null || /^[0-9a-f]{7,40}$/.test(x.commit), `${where}: tree`)
      t.ok(/^[0-9a-f]{7,40}$/.test(x.recorded.commit) && /^\d{4}-\d\d-\d\d$/.test(x.recorded.date), `${where}: recorded`)
      t.ok(x.date === null || /^\d{4}-\d\d-\d\d$/.test(x.date), `${where}: date`)
    }
  }
})

test('a changed record makes the page stale', async t => {
  const page = readFileSync(DOC, 'utf8')
  const changed = renderTables().replace(/\| [^|\n]+ \|/, '| changed |')
  t.not(withTables(page, changed), page)
  t.throws(() => withTables('no markers', ''), /markers/)
})
