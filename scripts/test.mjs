#!/usr/bin/env node
// Runs the tap suite and closes with a plain "N passed, N failed" line that CI reads.
// Just above that line it lists every failed assertion with the subtests around it and
// the first lines of its diagnostics, so a CI log that keeps only its tail still names
// what failed. Extra arguments are passed to tap (e.g. a test file or --grep).
import {spawn} from 'node:child_process'
import {fileURLToPath} from 'node:url'
import {installAgents} from './install-agents.mjs'

// The real-agent tests need every agent installed; one npm cannot install from its lock file comes from here.
const env = {...process.env}
try {
  env.SPLASH_AGENTS_BIN = installAgents()
} catch (err) {
  console.error(`# could not install the real agents (their tests will fail): ${err.message}`)
}
const tapBin = fileURLToPath(new URL('../node_modules/tap/dist/esm/run.mjs', import.meta.url))
const child = spawn(process.execPath, [tapBin, '--reporter=tap', ...process.argv.slice(2)], {
  stdio: ['ignore', 'pipe', 'inherit'],
  env,
})

const DIAG_LINES = 14
let tail = ''
let partial = ''
const path = [] // [{indent, name}] of the open subtests
const failures = [] // {where, lines}
let open = null // the failure whose diagnostics are being read
const indentOf = line => line.length - line.trimStart().length

function onLine(line) {
  const indent = indentOf(line)
  const text = line.trim()
  if (open) {
    if (open.lines.length < DIAG_LINES && (text.startsWith('---') || open.lines.length > 0) && !text.startsWith('...')) {
      if (indent >= open.indent) {
        open.lines.push(line.slice(open.indent))
        return
      }
    }
    if (text.startsWith('...') || indent < open.indent || open.lines.length >= DIAG_LINES) open = null
  }
  const sub = /^# Subtest: (.*)$/.exec(text)
  if (sub) {
    while (path.length && path[path.length - 1].indent >= indent) path.pop()
    path.push({indent, name: sub[1]})
    return
  }
  const notOk = /^not ok \d+ - (.*?)(?: # .*)?$/.exec(text)
  if (notOk) {
    // A failed subtest repeats as "not ok" at its parent's level; report only the leaves.
    const names = path.filter(p => p.indent < indent).map(p => p.name)
    const leaf = {where: [...names, notOk[1]].join(' > '), lines: [], indent}
    const last = failures[failures.length - 1]
    if (last && last.where.startsWith(leaf.where + ' > ')) return
    failures.push(leaf)
    open = leaf
  }
}

child.stdout.on('data', chunk => {
  process.stdout.write(chunk)
  const s = chunk.toString('utf8')
  tail = (tail + s).slice(-4096)
  partial += s
  const lines = partial.split('\n')
  partial = lines.pop() ?? ''
  for (const line of lines) onLine(line)
})
child.on('close', code => {
  if (partial) onLine(partial)
  const m = /# \{ total: (\d+), pass: (\d+)(?:, fail: (\d+))?/.exec(tail)
  const pass = m ? Number(m[2]) : 0
  let fail = m && m[3] ? Number(m[3]) : 0
  if (code !== 0 && fail === 0) fail = 1 // a crash or a failing file that reported no assertion
  if (failures.length) {
    console.log(`\n# Failed (${failures.length}):`)
    for (const f of failures) {
      console.log(`# - ${f.where}`)
      for (const l of f.lines) console.log(`#     ${l}`)
    }
  }
  console.log(`${pass} passed, ${fail} failed`)
  process.exit(code ?? 1)
})
