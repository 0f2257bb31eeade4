// Finds the API surfaces in plugins/: every folder with an index module is one Fastify plugin. Loading by folder
// keeps src/ from importing plugins/ (model families are found the same way, by src/package/families.ts).
import {readdir, access} from 'node:fs/promises'
import {fileURLToPath, pathToFileURL} from 'node:url'
import path from 'node:path'
import type {FastifyPluginAsync} from 'fastify'

const here = path.dirname(fileURLToPath(import.meta.url))
// Sources run from src/server/*.ts (tests), the build from dist/src/server/*.js.
const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js'
export const projectRoot = path.resolve(here, '..', '..', ext === '.js' ? '..' : '')
const codeRoot = path.resolve(here, '..', '..')

export interface FolderPlugin {
  name: string
  plugin: FastifyPluginAsync<Record<string, unknown>>
}

export async function loadFolderPlugins(kind: 'plugins'): Promise<FolderPlugin[]> {
  const dir = path.join(codeRoot, kind)
  const entries = await readdir(dir, {withFileTypes: true}).catch(() => [])
  const found: FolderPlugin[] = []
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (!entry.isDirectory()) continue
    const index = path.join(dir, entry.name, `index${ext}`)
    try {
      await access(index)
    } catch {
      continue
    }
    const mod = (await import(pathToFileURL(index).href)) as {default?: FastifyPluginAsync<Record<string, unknown>>}
    if (typeof mod.default !== 'function') throw new Error(`${kind}/${entry.name}/index${ext} has no default plugin export`)
    found.push({name: entry.name, plugin: mod.default})
  }
  return found
}
