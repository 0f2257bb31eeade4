// Checking a package folder against its manifest: every listed file's size, then its sha256.
import {createHash} from 'node:crypto'
import {createReadStream} from 'node:fs'
import {stat} from 'node:fs/promises'
import {join} from 'node:path'
import {SplashError} from '../errors.js'
import type {FileEntry, Manifest} from './manifest.js'

/** Size and sha256 of a file, streamed. */
export async function hashFile(path: string): Promise<{size: number; sha256: string}> {
  const hash = createHash('sha256')
  let size = 0
  for await (const chunk of createReadStream(path, {highWaterMark: 4 * 1024 * 1024})) {
    hash.update(chunk as Buffer)
    size += (chunk as Buffer).length
  }
  return {size, sha256: hash.digest('hex')}
}

export async function fileEntry(dir: string, path: string): Promise<FileEntry> {
  return {path, ...(await hashFile(join(dir, path)))}
}

export interface FileProblem {
  path: string
  problem: 'missing' | 'size' | 'sha256'
  detail: string
}

/** One file against its entry; undefined when it matches. */
export async function checkFile(dir: string, f: FileEntry, opts: {hash?: boolean} = {}): Promise<FileProblem | undefined> {
  const full = join(dir, f.path)
  const st = await stat(full).catch(() => undefined)
  if (!st || !st.isFile()) return {path: f.path, problem: 'missing', detail: `${f.path} is missing`}
  if (st.size !== f.size) {
    return {path: f.path, problem: 'size', detail: `${f.path} has ${st.size} bytes, the manifest says ${f.size}`}
  }
  if (opts.hash === false) return undefined
  const {sha256} = await hashFile(full)
  if (sha256 !== f.sha256) {
    return {path: f.path, problem: 'sha256', detail: `${f.path} has sha256 ${sha256}, the manifest says ${f.sha256}`}
  }
  return undefined
}

/** Every problem with the files of a package (sizes first for all files, then hashes). */
export async function checkPackage(dir: string, manifest: Manifest): Promise<FileProblem[]> {
  const problems: FileProblem[] = []
  for (const f of manifest.files) {
    const p = await checkFile(dir, f, {hash: false})
    if (p) problems.push(p)
  }
  const bad = new Set(problems.map(p => p.path))
  for (const f of manifest.files) {
    if (bad.has(f.path)) continue
    const p = await checkFile(dir, f)
    if (p) problems.push(p)
  }
  return problems
}

export function verificationError(where: string, problems: FileProblem[]): SplashError {
  return new SplashError(
    'package_corrupt',
    'invalid_request',
    `${where}: package verification failed: ${problems.map(p => p.detail).join('; ')}`,
  )
}
