#!/usr/bin/env node
// Builds the native core (core-native/) with cmake-js, offline. Runs at `npm install` / `npm ci`.
// `--force` rebuilds from scratch. Set SPLASH_SKIP_NATIVE=1 to skip (pure-TS work only).
import {spawnSync} from 'node:child_process'
import {existsSync, rmSync} from 'node:fs'
import {fileURLToPath} from 'node:url'
import path from 'node:path'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const dir = path.join(root, 'core-native')
if (process.env.SPLASH_SKIP_NATIVE === '1' || !existsSync(path.join(dir, 'CMakeLists.txt'))) {
  console.log('splash: native core skipped')
  process.exit(0)
}
// Fresh machines may lack cmake or a compiler: install them from Debian's packages when we can.
const setup = spawnSync('bash', [path.join(root, 'scripts', 'setup-system.sh')], {stdio: 'inherit'})
if (setup.status !== 0) process.exit(setup.status ?? 1)
const force = process.argv.includes('--force')
const out = path.join(dir, 'build')
if (force) rmSync(out, {recursive: true, force: true})
const cmakeJs = path.join(root, 'node_modules', 'cmake-js', 'bin', 'cmake-js')
const args = [cmakeJs, 'build', '--directory', dir, '--out', out, '--parallel', String(Math.max(1, Number(process.env.SPLASH_BUILD_JOBS ?? 2)))]
const r = spawnSync(process.execPath, args, {stdio: 'inherit', cwd: dir})
process.exit(r.status ?? 1)
