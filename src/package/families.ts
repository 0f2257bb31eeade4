// The one way src/ finds a model family: by its folder, models/<family>/, never by import. A family folder holds one
// module per phase: `sanitize` (default export: the builder's FamilyModule, src/package/builder/family.ts) and `index`
// (`load(dir, manifest)`: the ModelFamily that serving uses, src/chat/family.ts). Sources run from src/ find the
// sources' models/; the build (dist/src/) finds dist/models/.
import {existsSync} from 'node:fs'
import {readdir} from 'node:fs/promises'
import {dirname, join, resolve} from 'node:path'
import {fileURLToPath, pathToFileURL} from 'node:url'

const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js'

/** models/ beside the tree this module runs from. */
export const MODELS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'models')

/** The two modules of a family folder: `index` for serving, `sanitize` for building packages. */
export type FamilyPart = 'index' | 'sanitize'

/** The family folders under `dir`, sorted. */
export async function familyNames(dir = MODELS_DIR): Promise<string[]> {
  const entries = await readdir(dir, {withFileTypes: true}).catch(() => [])
  return entries.filter(e => e.isDirectory()).map(e => e.name).sort()
}

/** The path of one part of a family (this tree's extension first), or undefined when the folder lacks it. */
export function familyFile(name: string, part: FamilyPart, dir = MODELS_DIR): string | undefined {
  for (const e of [ext, ext === '.ts' ? '.js' : '.ts']) {
    const path = join(dir, name, `${part}${e}`)
    if (existsSync(path)) return path
  }
  return undefined
}

/** Imports one part of a family; undefined when the folder has no such module. */
export async function importFamily(name: string, part: FamilyPart, dir = MODELS_DIR): Promise<Record<string, unknown> | undefined> {
  const path = familyFile(name, part, dir)
  return path ? ((await import(pathToFileURL(path).href)) as Record<string, unknown>) : undefined
}
