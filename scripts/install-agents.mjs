#!/usr/bin/env node
// Installs the real coding agents that cannot be devDependencies into <repo>/.agents (an `npm install -g --prefix`),
// so the real-agent tests find them through SPLASH_AGENTS_BIN. opencode-ai is one: npm writes only this platform's
// entries of its per-platform optional packages into the lock file, and `npm ci` then refuses the lock as out of
// sync. Pinned; a second run with the pinned version in place does nothing. Prints the bin folder on success.
import {execFileSync, spawnSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {fileURLToPath} from 'node:url'
import path from 'node:path'

export const AGENTS = [{pkg: 'opencode-ai', version: '1.18.33', bin: 'opencode'}]

const root = fileURLToPath(new URL('..', import.meta.url))
export const agentsPrefix = path.join(root, '.agents')
export const agentsBin = path.join(agentsPrefix, 'bin')

function installed(a) {
  const exe = path.join(agentsBin, a.bin)
  if (!existsSync(exe)) return false
  const r = spawnSync(exe, ['--version'], {encoding: 'utf8', timeout: 60_000})
  return r.status === 0 && r.stdout.trim() === a.version
}

/** Installs what is missing; throws with npm's output when an install fails. */
export function installAgents(log = msg => console.error(msg)) {
  for (const a of AGENTS) {
    if (installed(a)) continue
    log(`installing ${a.pkg}@${a.version} into ${agentsPrefix}`)
    execFileSync('npm', ['install', '-g', '--prefix', agentsPrefix, '--no-fund', '--no-audit', `${a.pkg}@${a.version}`], {stdio: ['ignore', 'ignore', 'inherit']})
    if (!installed(a)) throw new Error(`${a.pkg}@${a.version} installed, but ${path.join(agentsBin, a.bin)} --version does not answer ${a.version}`)
  }
  return agentsBin
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) console.log(installAgents())
