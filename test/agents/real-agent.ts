// Runs a real, installed agent through its launcher against `splash serve` on the shipped default package
// (packages/default), headless, on small file tasks in a fresh folder each, and checks the files the agent left.
// The agent is looked for in node_modules/.bin, then in SPLASH_AGENTS_BIN (a folder, e.g. a
// `npm install -g --prefix`; `npm test` sets it to .agents/bin after scripts/install-agents.mjs), then on PATH.
// An agent found nowhere fails its test with the command that installs it.
import {existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type {Test} from 'tap'
import {root, startServe, type ServerProcess} from '../helpers/cli.js'
import {findExecutable} from '../../src/agents/process.js'
import {listFiles, runSplash} from './fake-agents.js'

export function findRealAgent(bin: string): string | undefined {
  const local = path.join(root, 'node_modules', '.bin', bin)
  if (existsSync(local)) return local
  const extra = process.env.SPLASH_AGENTS_BIN
  if (extra && existsSync(path.join(extra, bin))) return path.join(extra, bin)
  return findExecutable(bin, {PATH: process.env.PATH, HOME: '/nonexistent'})
}

/** A file task: the folder before (setup), what the user asks, and every file the folder must hold after. */
export interface FileTask {
  name: string
  prompt: string
  setup?: Record<string, string>
  expect: Record<string, string>
}

/** Several wordings of creating, appending to and renaming a file. */
export const FILE_TASKS: FileTask[] = [
  {name: 'create', prompt: 'Create a file named notes.txt containing hello world', expect: {'notes.txt': 'hello world\n'}},
  {name: 'create, quoted', prompt: 'Create a file called greeting.md with the content "Splash runs here"', expect: {'greeting.md': 'Splash runs here\n'}},
  {name: 'append', prompt: 'Append the line second line to log.txt', setup: {'log.txt': 'first line\n'}, expect: {'log.txt': 'first line\nsecond line\n'}},
  {name: 'rename', prompt: 'Rename draft.txt to final.txt', setup: {'draft.txt': 'keep me\n'}, expect: {'final.txt': 'keep me\n'}},
]

/** The folder's files other than dot-files (agents may keep their own state there), with their contents. */
function folderFiles(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const f of listFiles(dir)) if (!f.split(path.sep).some(p => p.startsWith('.'))) out[f] = readFileSync(path.join(dir, f), 'utf8')
  return out
}

/** `splash serve` on packages/default with its own native window and the default memory plan. */
export async function serveDefaultPackage(): Promise<{server: ServerProcess; stop(): void}> {
  const server = await startServe(['--model', path.join(root, 'packages', 'default')], {SPLASH_API_KEY: ''}, 300_000)
  for (const end = Date.now() + 300_000; ; ) {
    const res = await fetch(`${server.url}/ready`)
    if (res.ok) break
    if (server.child.exitCode !== null || Date.now() > end) throw new Error(`the default package did not load:\n${server.output()}`)
    await new Promise(r => setTimeout(r, 200))
  }
  return {server, stop: () => server.child.kill('SIGKILL')}
}

/**
 * `splash <bin> <args(prompt)>` with the real agent against the default package, once per file task, each in a
 * scratch HOME, data directory and working folder; checks exit 0, the exact files left in the folder, and that
 * the launcher wrote only into the data directory. Each task gets 5 minutes.
 */
export async function realFileTasks(t: Test, bin: string, install: string, args: (prompt: string) => string[]): Promise<void> {
  const agent = findRealAgent(bin)
  if (!agent) {
    t.fail(`real ${bin} is not installed (not in node_modules/.bin, SPLASH_AGENTS_BIN or PATH): ${install}`)
    return
  }
  const served = await serveDefaultPackage()
  t.teardown(() => served.stop())
  for (const task of FILE_TASKS) {
    await t.test(`${bin}: ${task.name}: ${task.prompt}`, async t => {
      const scratch = mkdtempSync(path.join(os.tmpdir(), `splash-real-${bin}-`))
      t.teardown(() => rmSync(scratch, {recursive: true, force: true}))
      const [home, data, work] = ['home', 'data', 'work'].map(d => path.join(scratch, d))
      for (const d of [home, data, work]) mkdirSync(d)
      for (const [f, text] of Object.entries(task.setup ?? {})) writeFileSync(path.join(work, f), text)
      const env: NodeJS.ProcessEnv = {
        PATH: [path.dirname(agent), path.dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].join(path.delimiter),
        HOME: home,
        SPLASH_DATA_DIR: data,
        SPLASH_PORT: String(served.server.port),
        LANG: 'C.UTF-8',
        TERM: 'dumb',
      }
      const started = Date.now()
      const res = await runSplash([bin, ...args(task.prompt)], env, work, 300_000)
      const seconds = ((Date.now() - started) / 1000).toFixed(1)
      // as JSON strings: model bytes may hold control characters that would end the TAP stream early
      t.comment(`${bin} ${task.name}: ${seconds} s; stdout: ${JSON.stringify(res.stdout.slice(-1500))}`)
      if (res.code !== 0 && res.stderr) t.comment(`${bin} stderr: ${JSON.stringify(res.stderr.slice(-3000))}`)
      t.equal(res.code, 0, `${bin} finished its turn with exit code 0`)
      t.same(folderFiles(work), task.expect, `${bin} left exactly the expected files (${readdirSync(work).join(', ')})`)
      t.ok(listFiles(data).every(f => f.startsWith(`agents/${bin}/`)), 'launcher files only under agents/<agent>/')
    })
  }
}
