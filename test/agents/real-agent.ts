// Runs a real, installed agent through its launcher against the real server serving the tiny package, headless,
// for one turn. The agent is looked for in node_modules/.bin, then in SPLASH_AGENTS_BIN (a folder, e.g. a
// `npm install -g --prefix`; `npm test` sets it to .agents/bin after scripts/install-agents.mjs), then on PATH.
// An agent found nowhere fails its test with the command that installs it.
import {existsSync, mkdirSync, mkdtempSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type {Test} from 'tap'
import {root} from '../helpers/cli.js'
import {findExecutable} from '../../src/agents/process.js'
import {listFiles, runSplash} from './fake-agents.js'
import {serveTinyModel} from './served-model.js'

export function findRealAgent(bin: string): string | undefined {
  const local = path.join(root, 'node_modules', '.bin', bin)
  if (existsSync(local)) return local
  const extra = process.env.SPLASH_AGENTS_BIN
  if (extra && existsSync(path.join(extra, bin))) return path.join(extra, bin)
  return findExecutable(bin, {PATH: process.env.PATH, HOME: '/nonexistent'})
}

/**
 * `splash <bin> <args>` with the real agent, in a scratch HOME, data directory and working directory; checks the
 * agent completes its turn (exit 0, an answer on stdout) and that the launcher wrote only into the data directory.
 */
export async function realTurn(t: Test, bin: string, install: string, args: string[]): Promise<void> {
  const agent = findRealAgent(bin)
  if (!agent) {
    t.fail(`real ${bin} is not installed (not in node_modules/.bin, SPLASH_AGENTS_BIN or PATH): ${install}`)
    return
  }
  // Claude Code's own system prompt and tools come to ~66K tokens with the tiny package's small tokenizer.
  // A terse package: a random-weight model over a 512-token vocabulary rarely ends an answer by itself, and a long
  // answer nearly always holds a tool-call opener (the grammar then completes a valid call), so with the package's
  // own stops an agent could go on calling tools for as long as the test allowed (a 600 s Codex run once).
  const served = await serveTinyModel({maxContext: '128K', terse: true})
  const scratch = mkdtempSync(path.join(os.tmpdir(), `splash-real-${bin}-`))
  t.teardown(() => {
    served.stop()
    rmSync(scratch, {recursive: true, force: true})
  })
  const [home, data, work] = ['home', 'data', 'work'].map(d => path.join(scratch, d))
  for (const d of [home, data, work]) mkdirSync(d)
  const env: NodeJS.ProcessEnv = {
    PATH: [path.dirname(agent), path.dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].join(path.delimiter),
    HOME: home,
    SPLASH_DATA_DIR: data,
    SPLASH_PORT: String(served.server.port),
    LANG: 'C.UTF-8',
    TERM: 'dumb',
  }
  const res = await runSplash([bin, ...args], env, work, 600_000)
  // As JSON strings: a random-weight model's bytes can hold control characters and line breaks that, raw in a TAP
  // comment, end the subtest's stream early (tap then counts none of the assertions below).
  t.comment(`${bin} stdout: ${JSON.stringify(res.stdout.slice(0, 2000))}`)
  if (res.stderr) t.comment(`${bin} stderr: ${JSON.stringify(res.stderr.slice(-4000))}`)
  t.equal(res.code, 0, `${bin} finished its turn with exit code 0`)
  // The served model has random weights: what it says (often only a think block, which agents do not print) is
  // luck, so the turn is checked on the server's side: the engine ran the agent's prompts to an answer. The terse
  // package may stop on its first token (an answer of no tokens), so tokens generated are reported, not required.
  const metrics = await (await fetch(`${served.server.url}/metrics`)).text()
  const counter = (name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0)
  const [prompted, generated] = [counter('splash_prompt_tokens_total'), counter('splash_generation_tokens_total')]
  const chats = [...metrics.matchAll(/^splash_requests_total\{route="\/v1\/(?:chat\/completions|messages|responses)",status="200"\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0)
  t.ok(chats > 0 && prompted > 0, `${bin}'s ${chats} model requests were answered (${prompted} prompt tokens in, ${generated} tokens generated)`)
  t.ok(listFiles(data).every(f => f.startsWith(`agents/${bin}/`)), 'launcher files only under agents/<agent>/')
}
