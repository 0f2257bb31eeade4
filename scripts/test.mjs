#!/usr/bin/env node
// Runs the tap suite and closes with a plain "N passed, N failed" line that CI reads.
// Extra arguments are passed to tap (e.g. a test file or --grep).
import {spawn} from 'node:child_process'
import {fileURLToPath} from 'node:url'

const tapBin = fileURLToPath(new URL('../node_modules/tap/dist/esm/run.mjs', import.meta.url))
const child = spawn(process.execPath, [tapBin, '--reporter=tap', ...process.argv.slice(2)], {
  stdio: ['ignore', 'pipe', 'inherit'],
})
let tail = ''
child.stdout.on('data', chunk => {
  process.stdout.write(chunk)
  tail = (tail + chunk.toString('utf8')).slice(-4096)
})
child.on('close', code => {
  const m = /# \{ total: (\d+), pass: (\d+)(?:, fail: (\d+))?/.exec(tail)
  const pass = m ? Number(m[2]) : 0
  let fail = m && m[3] ? Number(m[3]) : 0
  if (code !== 0 && fail === 0) fail = 1 // a crash or a failing file that reported no assertion
  console.log(`${pass} passed, ${fail} failed`)
  process.exit(code ?? 1)
})
