// The shape of the TypeScript tree (DEVELOPMENT.md, Layout): no import cycle among the project's modules (type-only
// imports count too), no folder of src/ holding more than 15 files directly, and the engine and the caches importing
// nothing of HTTP, chat rendering or the API plugins.
import {test} from 'tap'
import {readdirSync, readFileSync, statSync} from 'node:fs'
import {dirname, join, relative, resolve, sep} from 'node:path'
import {fileURLToPath} from 'node:url'
import ts from 'typescript'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const TOP = ['src', 'plugins', 'models']
const MAX_FILES = 15

function sources(dir: string): string[] {
  const out: string[] = []
  for (const name of readdirSync(dir)) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) out.push(...sources(p))
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(p)
  }
  return out
}

const rel = (p: string) => relative(root, p).split(sep).join('/')

/** Module → the project modules it imports (static, dynamic with a literal, `export … from`, type-only). */
function importGraph(files: string[]): Map<string, string[]> {
  const known = new Set(files.map(rel))
  const graph = new Map<string, string[]>()
  for (const file of files) {
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true)
    const deps = new Set<string>()
    for (const {fileName} of info.importedFiles) {
      if (!fileName.startsWith('.')) continue
      const target = rel(resolve(dirname(file), fileName)).replace(/\.js$/, '.ts')
      if (known.has(target)) deps.add(target)
    }
    graph.set(rel(file), [...deps].sort())
  }
  return graph
}

/** Strongly connected components of more than one module, or of one that imports itself (Tarjan). */
export function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0
  const idx = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  const visit = (v: string) => {
    idx.set(v, index)
    low.set(v, index++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!))
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = []
      for (;;) {
        const w = stack.pop()!
        onStack.delete(w)
        scc.push(w)
        if (w === v) break
      }
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(scc.sort())
    }
  }
  for (const v of graph.keys()) if (!idx.has(v)) visit(v)
  return found
}

const files = TOP.flatMap(d => sources(join(root, d)))
const graph = importGraph(files)

test('the cycle finder finds a loop and passes a tree', async t => {
  const loop = new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']], ['e', ['e']]])
  t.same(cycles(loop), [['a', 'b', 'c'], ['e']])
  t.same(cycles(new Map([['a', ['b', 'c']], ['b', ['c']], ['c', []]])), [])
  t.ok(graph.size > 100, `the graph holds the project's modules (${graph.size})`)
  t.ok((graph.get('src/engine/engine.ts') ?? []).includes('src/engine/scheduler.ts'), 'imports are read')
})

test('no import cycle among the TypeScript modules', async t => {
  const found = cycles(graph)
  t.same(found.map(c => c.join(' → ')), [], found.length ? `cycles:\n${found.map(c => c.join('\n  ')).join('\n\n')}` : 'none')
})

test(`no folder of src/ holds more than ${MAX_FILES} files directly`, async t => {
  const walk = (dir: string): void => {
    const entries = readdirSync(dir)
    const direct = entries.filter(n => statSync(join(dir, n)).isFile())
    t.ok(direct.length <= MAX_FILES, `${rel(dir)}: ${direct.length} files`)
    for (const n of entries) if (statSync(join(dir, n)).isDirectory()) walk(join(dir, n))
  }
  walk(join(root, 'src'))
})

test('src/ imports neither plugins/ nor models/', async t => {
  for (const [from, deps] of graph) {
    if (!from.startsWith('src/')) continue
    const bad = deps.filter(d => d.startsWith('plugins/') || d.startsWith('models/'))
    if (bad.length) t.fail(`${from} imports ${bad.join(', ')}`)
  }
  t.pass('checked')
})

// Which folders each layer must not import (DEVELOPMENT.md, Layout: imports run one way).
const NEVER: Array<[string, string[]]> = [
  ['src/engine/', ['src/chat/', 'src/server/', 'src/serving/', 'src/commands/', 'src/native/', 'plugins/', 'models/']],
  ['src/cache/', ['src/engine/', 'src/chat/', 'src/server/', 'src/serving/', 'src/commands/', 'src/native/', 'plugins/', 'models/']],
  ['src/native/', ['src/chat/', 'src/server/', 'src/serving/', 'src/commands/', 'plugins/', 'models/']],
  ['src/chat/', ['src/server/', 'src/serving/', 'src/commands/', 'src/native/', 'plugins/', 'models/']],
]

test('each layer imports only the layers below it; the engine and the caches know nothing of HTTP or chat', async t => {
  for (const file of files) {
    const from = rel(file)
    const rule = NEVER.find(([dir]) => from.startsWith(dir))
    if (!rule) continue
    const bad = (graph.get(from) ?? []).filter(d => rule[1].some(b => d.startsWith(b)))
    const web = from.startsWith('src/engine/') || from.startsWith('src/cache/')
    const pkgs = web
      ? ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles.map(f => f.fileName).filter(n => /^(fastify|@fastify\/|@huggingface\/jinja)/.test(n))
      : []
    if (bad.length || pkgs.length) t.fail(`${from} imports ${[...bad, ...pkgs].join(', ')}`)
  }
  t.pass('checked')
})
