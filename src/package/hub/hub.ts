// Downloading a package repo from a Hugging Face hub into the standard cache (models--owner--name/{blobs,snapshots,
// refs}, the layout Python's huggingface_hub reads and writes), with @huggingface/hub for the API calls and the file
// transfers. The library's downloadFileToCacheDir restarts a transfer from zero, so the cache entries are written
// here: each file streams into blobs/<etag>.incomplete and an interrupted transfer resumes from that file's length
// (a Range request through the library's Blob.slice), then is renamed and linked from snapshots/<sha>/<path>.
import {createHash} from 'node:crypto'
import {createWriteStream} from 'node:fs'
import {lstat, mkdir, readFile, readlink, rename, rm, stat, symlink, writeFile} from 'node:fs/promises'
import {dirname, join, relative} from 'node:path'
import {Readable, Transform} from 'node:stream'
import {pipeline} from 'node:stream/promises'
import {downloadFile, HubApiError, modelInfo, pathsInfo} from '@huggingface/hub'
import {SplashError} from '../../errors.js'
import {buildCommand, draftHint} from './known-drafts.js'
import {MANIFEST_FILE, validateManifest, type Manifest} from '../manifest.js'
import {repoFolder} from '../paths.js'
import {silentProgress, type Progress} from '../progress.js'

export interface HubOptions {
  endpoint: string
  token?: string
  cacheDir: string
  revision?: string
  progress?: Progress
  log?: (line: string) => void
  fetch?: typeof fetch
}

// The library announces each download on stdout with console.debug; Splash's output stays clean.
let quiet = 0
export async function silenced<T>(fn: () => Promise<T>): Promise<T> {
  const debug = console.debug
  if (quiet++ === 0) console.debug = () => undefined
  try {
    return await fn()
  } finally {
    if (--quiet === 0) console.debug = debug
  }
}

/** A hub answer Splash reports as such (auth, missing repo); anything else means the hub could not be reached. */
export function hubError(err: unknown, repo: string, endpoint: string): SplashError | undefined {
  if (err instanceof SplashError) return err
  if (err instanceof TypeError && /access token/i.test(err.message)) {
    return new SplashError('hub_unauthorized', 'authentication', `HF_TOKEN is not a hub token: ${err.message}`)
  }
  if (!(err instanceof HubApiError)) return undefined
  if (err.statusCode === 401 || err.statusCode === 403) {
    return new SplashError(
      'hub_unauthorized', 'authentication',
      `${endpoint} refused access to ${repo} (${err.statusCode}): set HF_TOKEN to a token that can read it`,
    )
  }
  if (err.statusCode === 404) {
    return new SplashError('repo_not_found', 'not_found', `${repo} was not found on ${endpoint} (404)`)
  }
  return undefined
}

export function notAPackage(where: string): SplashError {
  return new SplashError(
    'not_a_package', 'invalid_request',
    `${where} is not a Splash package (no splash.json; a plain MLX or Transformers checkpoint?); build one with \`${buildCommand(where)}\`${draftHint(where)}`,
  )
}

/** The snapshot folder that refs/<revision> (or a commit sha) points to in the cache, if its splash.json is there. */
export async function cachedSnapshot(cacheDir: string, repo: string, revision = 'main'): Promise<{dir: string; sha: string} | undefined> {
  const root = repoFolder(cacheDir, repo)
  let sha = revision
  if (!/^[0-9a-f]{40}$/.test(revision)) {
    sha = (await readFile(join(root, 'refs', revision), 'utf8').catch(() => '')).trim()
    if (!sha) return undefined
  }
  const dir = join(root, 'snapshots', sha)
  if (!(await stat(join(dir, MANIFEST_FILE)).catch(() => undefined))) return undefined
  return {dir, sha}
}

export interface Ctx {
  repo: string
  sha: string
  root: string
  o: HubOptions
}

export function creds(o: HubOptions) {
  return {hubUrl: o.endpoint, accessToken: o.token, fetch: o.fetch}
}

/** The git blob id of a file (what the hub reports as `oid`): the manifest itself is checked against it. */
export async function gitOid(path: string): Promise<string> {
  const b = await readFile(path)
  return createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex')
}

/** Removes a file's snapshot link and the blob behind it (after it failed verification). */
export async function evict(snapshotDir: string, path: string): Promise<void> {
  const link = join(snapshotDir, path)
  const st = await lstat(link).catch(() => undefined)
  if (st?.isSymbolicLink()) {
    const target = join(dirname(link), await readlink(link))
    await rm(target, {force: true})
  }
  await rm(link, {force: true})
}

/** Fetches one file of the snapshot into the cache (resuming a partial blob); returns its path in the snapshot. */
export async function fetchFile(c: Ctx, path: string, expectedSize?: number): Promise<string> {
  const pointer = join(c.root, 'snapshots', c.sha, path)
  const have = await stat(pointer).catch(() => undefined)
  if (have && expectedSize !== undefined && have.size === expectedSize) return pointer
  const [info] = await pathsInfo({repo: c.repo, paths: [path], revision: c.sha, expand: true, ...creds(c.o)})
  if (have && expectedSize === undefined && info && (await gitOid(pointer)) === info.oid) return pointer
  if (have) await evict(join(c.root, 'snapshots', c.sha), path) // wrong size, or a manifest that is not the hub's
  if (!info || info.type !== 'file') {
    if (path === MANIFEST_FILE) throw notAPackage(c.repo)
    throw new SplashError('package_incomplete', 'invalid_request', `${c.repo}@${c.sha.slice(0, 12)}: splash.json lists ${path}, which the repo does not have`)
  }
  const etag = String(info.lfs?.oid ?? info.xetHash ?? info.oid)
  const blob = join(c.root, 'blobs', etag)
  await mkdir(dirname(blob), {recursive: true})
  await mkdir(dirname(pointer), {recursive: true})
  if (!(await stat(blob).catch(() => undefined))) {
    const incomplete = `${blob}.incomplete`
    const done = (await stat(incomplete).catch(() => undefined))?.size ?? 0
    const file = await downloadFile({repo: c.repo, path, revision: c.sha, ...creds(c.o)})
    if (!file) throw new SplashError('package_incomplete', 'invalid_request', `${c.repo}: ${path} is missing on the hub`)
    const from = done <= file.size ? done : 0
    if (from > 0) c.o.log?.(`resuming ${path} at ${from} of ${file.size} bytes`)
    const progress = c.o.progress ?? silentProgress
    progress.add(from)
    const count = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        progress.add(chunk.length)
        cb(null, chunk)
      },
    })
    const body = Readable.fromWeb((from > 0 ? file.slice(from) : file).stream() as import('node:stream/web').ReadableStream)
    await pipeline(body, count, createWriteStream(incomplete, {flags: from > 0 ? 'a' : 'w'}))
    const got = (await stat(incomplete)).size
    if (got !== file.size) {
      throw new SplashError('download_incomplete', 'unavailable', `${c.repo}: ${path} stopped at ${got} of ${file.size} bytes; run again to resume`)
    }
    await rename(incomplete, blob)
  }
  await rm(pointer, {force: true})
  await symlink(relative(dirname(pointer), blob), pointer)
  return pointer
}

/**
 * Makes the repo's current snapshot complete in the cache: resolves the revision to a commit, fetches splash.json,
 * then every file it lists that is missing or has the wrong size, and points refs/<revision> at the commit.
 * Verification (sha256) is the caller's: see resolve.ts.
 */
export async function downloadSnapshot(repo: string, o: HubOptions): Promise<{dir: string; sha: string; manifest: Manifest}> {
  return silenced(async () => {
    const revision = o.revision ?? 'main'
    const info = await modelInfo({name: repo, revision, additionalFields: ['sha'], ...creds(o)})
    const sha = String((info as {sha?: string}).sha ?? '')
    if (!/^[0-9a-f]{40}$/.test(sha)) throw new SplashError('hub_bad_answer', 'unavailable', `${o.endpoint}: no commit sha for ${repo}@${revision}`)
    const c: Ctx = {repo, sha, root: repoFolder(o.cacheDir, repo), o}
    const dir = join(c.root, 'snapshots', sha)
    const manifestPath = await fetchFile(c, MANIFEST_FILE)
    const manifest = validateManifest(JSON.parse(await readFile(manifestPath, 'utf8')), `${repo}/${MANIFEST_FILE}`)
    const missing = []
    for (const f of manifest.files) {
      const st = await stat(join(dir, f.path)).catch(() => undefined)
      if (!st || st.size !== f.size) missing.push(f)
    }
    if (missing.length > 0) {
      const total = missing.reduce((n, f) => n + f.size, 0)
      o.progress?.start(total, repo)
      try {
        for (const f of missing) await fetchFile(c, f.path, f.size)
      } finally {
        o.progress?.done()
      }
    }
    await mkdir(join(c.root, 'refs'), {recursive: true})
    if (revision !== sha) await writeFile(join(c.root, 'refs', revision), sha)
    return {dir, sha, manifest}
  })
}

/** Fetches one file again after it failed verification (its blob was evicted). */
export async function refetch(repo: string, sha: string, path: string, size: number, o: HubOptions): Promise<void> {
  await silenced(() => fetchFile({repo, sha, root: repoFolder(o.cacheDir, repo), o}, path, size))
}
