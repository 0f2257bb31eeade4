// Loads @mlc-ai/web-xgrammar (the XGrammar engine compiled to wasm, inlined in one file) once per process.
// Its package says "type": "module" but lib/index.js is a CommonJS/UMD bundle, so neither import nor
// require() can load it under Node 20: the file is compiled as a CommonJS module by hand. Nothing is
// fetched (the wasm is inside the bundle).
import {readFileSync} from 'node:fs'
import {createRequire, Module} from 'node:module'
import {dirname, join} from 'node:path'
import type * as XG from '@mlc-ai/web-xgrammar'

export type XGrammar = typeof XG

let loaded: XGrammar | undefined

interface CommonJsModule {
  filename: string
  paths: string[]
  exports: unknown
  _compile(source: string, filename: string): void
}

/**
 * Drops the loaded instance: the next xgrammar() loads a fresh one. For after a trap inside the wasm (a stack
 * overflow, an out-of-bounds access), which can leave the instance unable to compile anything again; objects made
 * by the old instance keep working as far as it still does.
 */
export function reloadXGrammar(): void {
  loaded = undefined
}

/**
 * True for an error raised inside XGrammar's wasm: a trap (a stack overflow, an out-of-bounds access), after which
 * the instance may not work again, or an abort on one of its own checks ("Aborted()", a grammar it cannot build),
 * which unwinds without freeing what the call held: after ~1,500 of them the instance printed garbage.
 */
export function isEngineFault(e: unknown): boolean {
  return e instanceof WebAssembly.RuntimeError
}

/** The xgrammar module (loaded on first use, then shared). */
export function xgrammar(): XGrammar {
  if (loaded) return loaded
  const require = createRequire(import.meta.url)
  const file = join(dirname(require.resolve('@mlc-ai/web-xgrammar/package.json')), 'lib', 'index.js')
  const ModuleCtor = Module as unknown as {new (id: string): CommonJsModule; _nodeModulePaths(dir: string): string[]}
  const m = new ModuleCtor(file)
  m.filename = file
  m.paths = ModuleCtor._nodeModulePaths(dirname(file))
  m._compile(readFileSync(file, 'utf8'), file)
  loaded = m.exports as XGrammar
  return loaded
}
