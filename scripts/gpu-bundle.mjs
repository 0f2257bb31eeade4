#!/usr/bin/env node
// Bundles the built server for a GPU machine that has no Node: this machine's node binary and the app (dist, bin,
// the native build with libsplash_cuda.so, production node_modules minus the PDF stack) as two xz archives, plus
// scripts/gpu-http-bench.sh, which unpacks them there and runs `splash bench` over HTTP on the CUDA backend.
// Needs `npm run build` and `npm run build:native` first. Usage: node scripts/gpu-bundle.mjs OUT
import {spawnSync} from 'node:child_process'
import {cp, mkdir, rm, writeFile} from 'node:fs/promises'
import {existsSync, statSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const out = path.resolve(process.argv[2] ?? '.gpu-http')
const native = 'core-native/build/Release'
for (const f of ['dist/src/commands/serve.js', `${native}/splash_core.node`, `${native}/libsplash_cuda.so`])
  if (!existsSync(path.join(root, f))) throw new Error(`missing ${f}: run npm run build and npm run build:native first`)

const run = (cmd, args, opts = {}) => {
  const r = spawnSync(cmd, args, {stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 28, ...opts})
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status})`)
  return r.stdout
}

await rm(out, {recursive: true, force: true})
await mkdir(path.join(out, 'scripts'), {recursive: true})
await cp(path.join(root, 'scripts/gpu-http-bench.sh'), path.join(out, 'scripts/gpu-http-bench.sh'))

// node itself, compressed once per node version (minutes on a small machine)
const nodeXz = path.join(tmpdir(), `splash-node-${process.version}.xz`)
if (!existsSync(nodeXz)) await writeFile(nodeXz, run('xz', ['-T2', '-6', '-c', process.execPath]))
await cp(nodeXz, path.join(out, 'node.xz'))

// production dependencies, without what a benchmark never loads (pdfjs and its canvas; sharp's libvips is loaded
// only by the image worker)
const prod = run('npm', ['ls', '--omit=dev', '--all', '--parseable'], {cwd: root}).toString().trim().split('\n')
const skip = /node_modules\/(pdfjs-dist|@napi-rs|@img)(\/|$)/
const mods = [...new Set(prod.map(p => path.relative(root, p)).filter(p => p.startsWith('node_modules/') && !skip.test(p)))]
// keep only top-most folders (nested ones ride along with their parent)
const top = mods.filter(m => !mods.some(o => o !== m && m.startsWith(o + '/')))
const files = ['package.json', 'bin', 'dist', 'oclif.manifest.json', 'webui', `${native}/splash_core.node`, `${native}/libsplash_cuda.so`, ...top]
run('tar', ['-C', root, '-cJf', path.join(out, 'app.tar.xz'), ...files], {env: {...process.env, XZ_OPT: '-T2 -6'}})
const mb = f => (statSync(path.join(out, f)).size / 2 ** 20).toFixed(1)
console.log(`bundled ${out}: node.xz ${mb('node.xz')} MiB, app.tar.xz ${mb('app.tar.xz')} MiB (${top.length} packages)`)
