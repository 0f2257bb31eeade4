// The prefix cache's disk folders as a whole: <data dir>/prefix-cache/<signature>/, one per package and build
// (prefix-disk.ts keeps one of them). What `splash cache` lists and clears, and how the folders of other signatures
// are kept from growing without bound.
import {existsSync, readdirSync, rmSync, statSync} from 'node:fs'
import {join} from 'node:path'
import {dataDir} from '../package/paths.js'

export interface PrefixFolder {
  signature: string
  path: string
  snapshots: number
  bytes: number
  /** When a file in it was last written or read back (ms since the epoch; an empty one: the folder's own time). */
  newest: number
}

/** <data dir>/prefix-cache. */
export function prefixCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return join(dataDir(env), 'prefix-cache')
}

/** Every signature folder under `root`, least recently used first. */
export function listPrefixFolders(root: string): PrefixFolder[] {
  if (!existsSync(root)) return []
  return readdirSync(root, {withFileTypes: true})
    .filter(d => d.isDirectory())
    .map(d => {
      const path = join(root, d.name)
      let bytes = 0
      let newest = 0
      let snapshots = 0
      for (const f of readdirSync(path, {recursive: true, withFileTypes: true})) {
        if (!f.isFile()) continue
        const st = statSync(join(f.parentPath ?? f.path, f.name))
        bytes += st.size
        newest = Math.max(newest, st.mtimeMs)
        if (f.name.endsWith('.snap')) snapshots++
      }
      return {signature: d.name, path, snapshots, bytes, newest: newest || statSync(path).mtimeMs}
    })
    .sort((a, b) => a.newest - b.newest)
}

/**
 * The folders of other signatures under `root` (other packages, or this one under an earlier build): together they
 * may hold one more budget's worth; the least recently used go whole until they do. One that has held no snapshot for
 * a day goes too.
 */
export function trimOtherFolders(root: string, keep: string, budget: number, now = Date.now()): void {
  const others = listPrefixFolders(root).filter(f => f.signature !== keep)
  let total = others.reduce((a, o) => a + o.bytes, 0)
  for (const o of others) {
    if (total <= budget && (o.snapshots > 0 || now - o.newest < DAY_MS)) continue
    rmSync(o.path, {recursive: true, force: true})
    total -= o.bytes
  }
}

const DAY_MS = 24 * 3600 * 1000

/** Deletes every folder (a server running now keeps its index and finds its files gone: misses, not errors). */
export function clearPrefixFolders(root: string): PrefixFolder[] {
  const all = listPrefixFolders(root)
  for (const f of all) rmSync(f.path, {recursive: true, force: true})
  return all
}
