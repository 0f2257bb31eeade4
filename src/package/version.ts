// "splash <version>" for package provenance, read from package.json (one or two folders up from src/ or dist/src/).
import {existsSync, readFileSync} from 'node:fs'
import {fileURLToPath} from 'node:url'

let cached: string | undefined

export function builderId(): string {
  if (cached) return cached
  for (const rel of ['../../package.json', '../../../package.json']) {
    const path = fileURLToPath(new URL(rel, import.meta.url))
    if (!existsSync(path)) continue
    const pkg = JSON.parse(readFileSync(path, 'utf8')) as {name?: string; version?: string}
    if (pkg.name === 'splash') return (cached = `splash ${pkg.version}`)
  }
  return (cached = 'splash')
}
