// Splash's records in its data directory: which packages this machine served (links.json: name → folder, with the
// repo and snapshot), and which package folders were verified (verified.json: per file its size, mtime and inode at
// verification, so a folder whose files have not changed since is not hashed again).
import {mkdir, readFile, rename, stat, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import type {Manifest} from './manifest.js'
import {dataDir} from './paths.js'

export interface Link {
  name: string
  dir: string
  repo?: string
  snapshot?: string
  size: number
  lastUsed: string
}

interface Stamp {
  [path: string]: [size: number, mtimeMs: number, ino: number]
}

async function load<T>(file: string, fallback: T): Promise<T> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as T
  } catch {
    return fallback
  }
}

async function save(file: string, value: unknown): Promise<void> {
  await mkdir(join(file, '..'), {recursive: true})
  const tmp = `${file}.${process.pid}.tmp`
  await writeFile(tmp, JSON.stringify(value, null, 2) + '\n')
  await rename(tmp, file)
}

const linksFile = (d: string) => join(d, 'links.json')
const stampsFile = (d: string) => join(d, 'verified.json')

export async function recordLink(link: Omit<Link, 'lastUsed'>, dir = dataDir()): Promise<void> {
  const all = await load<Record<string, Link>>(linksFile(dir), {})
  all[link.name] = {...link, lastUsed: new Date().toISOString()}
  await save(linksFile(dir), all)
}

export async function listLinks(dir = dataDir()): Promise<(Link & {present: boolean})[]> {
  const all = await load<Record<string, Link>>(linksFile(dir), {})
  const out = []
  for (const l of Object.values(all)) {
    const present = !!(await stat(join(l.dir, 'splash.json')).catch(() => undefined))
    out.push({...l, present})
  }
  return out.sort((a, b) => a.name.localeCompare(b.name))
}

async function fileStamp(pkgDir: string, path: string): Promise<[number, number, number] | undefined> {
  const st = await stat(join(pkgDir, path)).catch(() => undefined)
  return st ? [st.size, st.mtimeMs, st.ino] : undefined
}

/** Whether every file of the manifest is unchanged since it was last verified in this folder. */
export async function isStamped(pkgDir: string, m: Manifest, dir = dataDir()): Promise<boolean> {
  const stamps = await load<Record<string, Stamp>>(stampsFile(dir), {})
  const s = stamps[pkgDir]
  if (!s) return false
  for (const f of m.files) {
    const now = await fileStamp(pkgDir, f.path)
    const was = s[`${f.path}:${f.sha256}`]
    if (!now || !was || now[0] !== f.size || now.some((v, i) => v !== was[i])) return false
  }
  return true
}

export async function stamp(pkgDir: string, m: Manifest, dir = dataDir()): Promise<void> {
  const stamps = await load<Record<string, Stamp>>(stampsFile(dir), {})
  const s: Stamp = {}
  for (const f of m.files) {
    const now = await fileStamp(pkgDir, f.path)
    if (now) s[`${f.path}:${f.sha256}`] = now
  }
  stamps[pkgDir] = s
  await save(stampsFile(dir), stamps)
}
