// Finding an agent's executable, reading its version, and running it attached to this terminal: stdio
// inherited, termination signals forwarded, its exit status returned as ours.
import {spawn, execFile} from 'node:child_process'
import {accessSync, constants, statSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
/** The Splash checkout or install this file runs from (src/agents, or dist/src/agents in the build). */
const projectRoot = path.resolve(here, '..', '..', here.split(path.sep).includes('dist') ? '..' : '')

/**
 * Folders of the Splash project that hold agents when they are not on PATH: node_modules/.bin (`npm ci` puts the
 * pinned Claude Code and Codex there) and .agents/bin (scripts/install-agents.mjs installs opencode there).
 */
export function projectAgentDirs(root = projectRoot): string[] {
  return [path.join(root, 'node_modules', '.bin'), path.join(root, '.agents', 'bin')]
}

function isExecutable(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false
    if (process.platform !== 'win32') accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/**
 * The first executable named `name` on PATH, then in `dirs` (the project's own folders, projectAgentDirs), then in
 * the fallback paths (relative to HOME); else undefined.
 */
export function findExecutable(name: string, env: NodeJS.ProcessEnv = process.env, fallbacks: string[] = [], dirs: string[] = []): string | undefined {
  const exts = process.platform === 'win32' ? ['', ...(env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';').map(e => e.toLowerCase())] : ['']
  for (const dir of [...(env.PATH ?? '').split(path.delimiter), ...dirs]) {
    if (!dir) continue
    for (const ext of exts) {
      const file = path.join(dir, name + ext)
      if (isExecutable(file)) return file
    }
  }
  const home = env.HOME ?? os.homedir()
  for (const rel of fallbacks) {
    const file = path.join(home, rel)
    if (isExecutable(file)) return file
  }
  return undefined
}

/** Runs `<file> --version` and returns the first x.y.z it prints (undefined when it prints none or fails). */
export function readVersion(file: string, env: NodeJS.ProcessEnv = process.env, timeoutMs = 30_000): Promise<string | undefined> {
  return new Promise(resolve => {
    execFile(file, ['--version'], {env, timeout: timeoutMs, windowsHide: true}, (_err, stdout, stderr) => {
      const m = /(\d+)\.(\d+)\.(\d+)/.exec(`${stdout}\n${stderr}`)
      resolve(m ? `${m[1]}.${m[2]}.${m[3]}` : undefined)
    })
  })
}

/** Numeric comparison of x.y.z versions: negative when a < b. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number)
  const pb = b.split('.').map(Number)
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0)
    if (d !== 0) return d
  }
  return 0
}

/**
 * The environment with the folder of the Node running Splash appended to PATH when PATH has no `node`: agents
 * installed by npm start with `#!/usr/bin/env node`, and Splash may have been started by a full path to Node.
 */
export function withNode(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (findExecutable('node', {PATH: env.PATH ?? ''})) return env
  const dir = path.dirname(process.execPath)
  return {...env, PATH: env.PATH ? `${env.PATH}${path.delimiter}${dir}` : dir}
}

/** The environment the agent sees: ours, with the plan's changes (undefined removes a variable). */
export function mergeEnv(base: NodeJS.ProcessEnv, changes: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {...base}
  for (const [key, value] of Object.entries(changes)) {
    if (value === undefined) delete env[key]
    else env[key] = value
  }
  return env
}

/**
 * Runs the agent with this process's stdio and resolves with its exit code (128 + signal number when a signal
 * ended it, as shells report). SIGTERM and SIGHUP are forwarded. SIGINT is forwarded only when stdin is not a
 * terminal: at a terminal, Ctrl-C already reaches the agent (same process group), and a second copy would make
 * an agent such as Claude Code take one Ctrl-C for the "press twice to exit" gesture.
 */
export function runAttached(file: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {env, stdio: 'inherit', windowsHide: false})
    const forwarded: NodeJS.Signals[] = ['SIGTERM', 'SIGHUP']
    const handlers = new Map<NodeJS.Signals, () => void>()
    const forward = (signal: NodeJS.Signals) => () => {
      if (signal === 'SIGINT' && process.stdin.isTTY) return
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
    }
    for (const signal of [...forwarded, 'SIGINT' as const]) {
      const handler = forward(signal)
      handlers.set(signal, handler)
      process.on(signal, handler)
    }
    const cleanup = () => {
      for (const [signal, handler] of handlers) process.off(signal, handler)
    }
    child.once('error', err => {
      cleanup()
      reject(err)
    })
    child.once('exit', (code, signal) => {
      cleanup()
      if (code !== null) resolve(code)
      else resolve(128 + (signal ? (os.constants.signals[signal] ?? 0) : 0))
    })
  })
}
