// `splash cache`: the prefix cache's disk folders listed (most recently used first) and cleared.
import t from 'tap'
import {mkdirSync, mkdtempSync, readdirSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {runCli} from '../helpers/cli.js'

t.test('lists the folders, then clears them', async t => {
  const data = mkdtempSync(join(tmpdir(), 'splash-cache-cmd-'))
  const env = {SPLASH_DATA_DIR: data}
  const empty = await runCli(['cache'], env)
  t.equal(empty.code, 0)
  t.match(empty.stdout, /no prefix cache on disk yet/)
  const root = join(data, 'prefix-cache')
  for (const [name, snaps, age] of [['aaa', 2, 5000], ['bbb', 1, 1000]] as const) {
    const dir = join(root, name, 'snapshots')
    mkdirSync(dir, {recursive: true})
    for (let i = 0; i < snaps; i++) {
      const f = join(dir, `s${i}.snap`)
      writeFileSync(f, Buffer.alloc(1024))
      const when = new Date(Date.now() - age * 1000)
      utimesSync(f, when, when)
    }
  }
  const listed = await runCli(['cache'], env)
  t.equal(listed.code, 0)
  const lines = listed.stdout.trim().split('\n')
  t.equal(lines[0], `${root}:`)
  t.match(lines[1], /^FOLDER\s+SNAPSHOTS\s+SIZE\s+LAST USED$/)
  t.match(lines[2], /^bbb\s+1\s+1\.00 KiB\s+\d{4}-/, 'the most recently used first')
  t.match(lines[3], /^aaa\s+2\s+2\.00 KiB\s+\d{4}-/)
  const cleared = await runCli(['cache', '--clear'], env)
  t.equal(cleared.code, 0)
  t.match(cleared.stdout, /cleared 2 folders \(3\.00 KiB\)/)
  t.same(readdirSync(root), [])
})
