// Fake agent executables for launcher tests: small shell wrappers around one Node script that print a version
// for --version, and otherwise record their argv, environment, working directory and the config files they
// are pointed at into a JSON file, then exit with a chosen code (or wait for a signal first).
import {spawn, type ChildProcess} from 'node:child_process'
import {chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {bin} from '../helpers/cli.js'

export type AgentName = 'claude' | 'codex' | 'opencode' | 'hermes'

/** What each real agent prints for --version, for a given version number. */
export const versionText: Record<AgentName, (v: string) => string> = {
  claude: v => `${v} (Claude Code)`,
  codex: v => `codex-cli ${v}`,
  opencode: v => v,
  hermes: v => `Hermes Agent v${v} (2026.11.20)`,
}

/** Versions recent enough for every launcher. */
export const currentVersion: Record<AgentName, string> = {claude: '2.1.332', codex: '0.171.0', opencode: '1.18.33', hermes: '0.19.1'}

/** The instructions the fake Codex's own catalog gives its first model. */
export const FAKE_CODEX_INSTRUCTIONS = 'You are Codex, the fake one. Follow the user.'

const FAKE_SCRIPT = `
const FAKE_CODEX_INSTRUCTIONS = ${JSON.stringify(FAKE_CODEX_INSTRUCTIONS)}
import fs from 'node:fs'
import path from 'node:path'
const env = process.env
const argv = process.argv.slice(2)
if (argv[0] === '--version') {
  console.log(env.FAKE_AGENT_VERSION_TEXT)
  process.exit(0)
}
// Codex's built-in catalog, as \`codex debug models --bundled\` prints it (two models, the first by priority listed second)
if (env.FAKE_AGENT_NAME === 'codex' && argv[0] === 'debug' && argv[1] === 'models') {
  if (env.FAKE_CODEX_NO_CATALOG === '1') process.exit(2)
  console.log(JSON.stringify({models: [
    {slug: 'fake-2', visibility: 'list', priority: 2, base_instructions: 'You are the second model.'},
    {slug: 'fake-hidden', visibility: 'hide', priority: 0, base_instructions: 'You are hidden.'},
    {slug: 'fake-1', visibility: 'list', priority: 1, base_instructions: FAKE_CODEX_INSTRUCTIONS},
  ]}))
  process.exit(0)
}
const files = {}
for (const a of argv) {
  const m = /^model_catalog_json=(.*)$/.exec(a)
  if (m) {
    const p = JSON.parse(m[1])
    files.codexCatalog = {path: p, text: fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : null}
  }
}
if (env.HERMES_HOME) {
  const p = path.join(env.HERMES_HOME, 'config.yaml')
  files.hermesConfig = {path: p, text: fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : null}
}
const record = {agent: env.FAKE_AGENT_NAME, argv, env: {...env}, cwd: process.cwd(), files, signals: []}
const save = () => fs.writeFileSync(env.FAKE_AGENT_RECORD, JSON.stringify(record, null, 1))
const code = Number(env.FAKE_AGENT_EXIT ?? 0)
if (env.FAKE_AGENT_WAIT === '1') {
  for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    process.on(s, () => {
      record.signals.push(s)
      save()
      process.exit(code)
    })
  }
  save()
  setInterval(() => {}, 1000)
} else {
  save()
  if (env.FAKE_AGENT_KILL_SELF) process.kill(process.pid, env.FAKE_AGENT_KILL_SELF)
  else process.exit(code)
}
`

export interface Sandbox {
  root: string
  /** The only folder on PATH. */
  binDir: string
  home: string
  data: string
  work: string
  record: string
  cleanup(): void
}

export function makeSandbox(): Sandbox {
  const root = mkdtempSync(path.join(os.tmpdir(), 'splash-agents-'))
  const dirs = ['bin', 'home', 'data', 'work', 'records'].map(d => path.join(root, d))
  for (const d of dirs) mkdirSync(d)
  writeFileSync(path.join(root, 'fake-agent.mjs'), FAKE_SCRIPT)
  return {
    root,
    binDir: dirs[0],
    home: dirs[1],
    data: dirs[2],
    work: dirs[3],
    record: path.join(dirs[4], 'record.json'),
    cleanup: () => rmSync(root, {recursive: true, force: true}),
  }
}

/** Puts a fake `name` on the sandbox PATH that reports `version`. */
export function installFake(sb: Sandbox, name: AgentName, version = currentVersion[name]): string {
  const file = path.join(sb.binDir, name)
  const text = versionText[name](version).replace(/'/g, `'\\''`)
  writeFileSync(
    file,
    `#!/bin/sh\nFAKE_AGENT_NAME=${name} FAKE_AGENT_VERSION_TEXT='${text}' exec '${process.execPath}' '${path.join(sb.root, 'fake-agent.mjs')}' "$@"\n`,
  )
  chmodSync(file, 0o755)
  return file
}

export interface AgentRecord {
  agent: AgentName
  argv: string[]
  env: Record<string, string>
  cwd: string
  files: {codexCatalog?: {path: string; text: string | null}; hermesConfig?: {path: string; text: string | null}}
  signals: string[]
}

export function readRecord(sb: Sandbox): AgentRecord {
  return JSON.parse(readFileSync(sb.record, 'utf8')) as AgentRecord
}

/** A clean environment for splash: nothing from the test runner's own environment but what is given. */
export function sandboxEnv(sb: Sandbox, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {PATH: sb.binDir, HOME: sb.home, SPLASH_DATA_DIR: sb.data, FAKE_AGENT_RECORD: sb.record, LANG: 'C.UTF-8', ...extra}
}

export interface SplashRun {
  code: number | null
  stdout: string
  stderr: string
}

/** Starts `splash <args>` in the sandbox's work folder with exactly `env`. */
export function spawnSplash(args: string[], env: NodeJS.ProcessEnv, cwd: string): ChildProcess {
  return spawn(process.execPath, [bin, ...args], {env, cwd, stdio: ['pipe', 'pipe', 'pipe']})
}

export function runSplash(args: string[], env: NodeJS.ProcessEnv, cwd: string, timeoutMs = 60_000): Promise<SplashRun> {
  return new Promise((resolve, reject) => {
    const child = spawnSplash(args, env, cwd)
    child.stdin?.end()
    let stdout = ''
    let stderr = ''
    child.stdout?.on('data', d => (stdout += d))
    child.stderr?.on('data', d => (stderr += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      // the output as JSON strings: a model's raw bytes in a TAP line can end the stream early
      reject(new Error(`splash ${args.join(' ')} did not finish in ${timeoutMs} ms; stdout ${JSON.stringify(stdout.slice(-2000))}; stderr ${JSON.stringify(stderr.slice(-2000))}`))
    }, timeoutMs)
    child.on('close', code => {
      clearTimeout(timer)
      resolve({code, stdout, stderr})
    })
  })
}

/** Every file below `dir`, as paths relative to it. */
export function listFiles(dir: string): string[] {
  if (!existsSync(dir)) return []
  const out: string[] = []
  const walk = (d: string) => {
    for (const e of readdirSync(d, {withFileTypes: true})) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) walk(p)
      else out.push(path.relative(dir, p))
    }
  }
  walk(dir)
  return out.sort()
}

/** Resolves once `file` exists (the fake agent writes its record when it has started). */
export async function waitForFile(file: string, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs
  while (!existsSync(file)) {
    if (Date.now() > end) throw new Error(`${file} did not appear in ${timeoutMs} ms`)
    await new Promise(r => setTimeout(r, 50))
  }
}
