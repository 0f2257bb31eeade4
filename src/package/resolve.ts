// From what a user types (--model owner/repo, or a folder) to a verified package folder and its manifest.
//
// Hub repos, in this order:
//  1. The cache already holds refs/<revision> → snapshots/<sha> with every file, verified before and unchanged since
//     (links.ts stamps: size, mtime, inode): use it. No network at all — that is how a package serves offline.
//  2. Otherwise ask the hub: fetch what is missing (resuming partial blobs), verify every file (size, sha256); a
//     file that fails is named, evicted from the cache and fetched once more; failing again is an error.
//  3. If the hub cannot be reached (connection refused, DNS, timeout, 5xx) and the cache holds a snapshot, verify it
//     fully and use it. A 401/403/404 is reported as such, never papered over with the cache.
// `splash pull` always asks the hub (2), so it is the way to pick up a newer revision. HF_HUB_OFFLINE=1 skips the
// network entirely. Local folders are verified the same way (stamped, so unchanged folders are not re-hashed).
import {stat} from 'node:fs/promises'
import {resolve as resolvePath} from 'node:path'
import {SplashError} from '../errors.js'
import {cachedSnapshot, downloadSnapshot, evict, hubError, notAPackage, refetch, type HubOptions} from './hub/hub.js'
import {isStamped, recordLink, stamp} from './links.js'
import {MANIFEST_FILE, readManifest, type Manifest} from './manifest.js'
import {dataDir, hubCacheDir, hubEndpoint, isRepoId} from './paths.js'
import {silentProgress, type Progress} from './progress.js'
import {checkPackage, verificationError, type FileProblem} from './verify.js'

export interface ResolveOptions {
  env?: NodeJS.ProcessEnv
  progress?: Progress
  log?: (line: string) => void
  /** Always ask the hub (splash pull). */
  refresh?: boolean
  /** Record the package in the data directory's links (default true). */
  record?: boolean
  revision?: string
  fetch?: typeof fetch
}

export interface Resolved {
  dir: string
  manifest: Manifest
  source: 'local' | 'cache' | 'hub'
  repo?: string
  sha?: string
}

export function hubOptions(o: ResolveOptions): HubOptions {
  const env = o.env ?? process.env
  return {
    endpoint: hubEndpoint(env),
    token: env.HF_TOKEN || env.HUGGING_FACE_HUB_TOKEN || undefined,
    cacheDir: hubCacheDir(env),
    revision: o.revision,
    progress: o.progress ?? silentProgress,
    log: o.log,
    fetch: o.fetch,
  }
}

async function isDir(p: string): Promise<boolean> {
  return !!(await stat(p).catch(() => undefined))?.isDirectory()
}

/** Reads the manifest of a folder, or says why it is not a package. */
export async function manifestOf(dir: string): Promise<Manifest> {
  if (!(await stat(`${dir}/${MANIFEST_FILE}`).catch(() => undefined))) {
    if (await stat(`${dir}/config.json`).catch(() => undefined)) throw notAPackage(dir)
    throw new SplashError('not_a_package', 'not_found', `${dir} has no splash.json: not a Splash package`)
  }
  return readManifest(dir)
}

/** Verifies a folder against its manifest unless it was verified and is unchanged; records the verification. */
export async function verifyFolder(dir: string, m: Manifest, data: string): Promise<void> {
  if (await isStamped(dir, m, data)) return
  const problems = await checkPackage(dir, m)
  if (problems.length > 0) throw verificationError(dir, problems)
  await stamp(dir, m, data)
}

const size = (m: Manifest) => m.files.reduce((n, f) => n + f.size, 0)

export async function resolvePackage(spec: string, o: ResolveOptions = {}): Promise<Resolved> {
  const env = o.env ?? process.env
  const data = dataDir(env)
  const local = resolvePath(spec)
  let r: Resolved
  if (await isDir(local)) {
    const manifest = await manifestOf(local)
    await verifyFolder(local, manifest, data)
    r = {dir: local, manifest, source: 'local'}
  } else if (isRepoId(spec)) {
    r = await resolveRepo(spec, o, data)
  } else {
    throw new SplashError('package_not_found', 'not_found', `${spec}: no such folder, and not a hub repo id (owner/name)`)
  }
  if (o.record !== false) {
    await recordLink({name: r.manifest.name, dir: r.dir, repo: r.repo, snapshot: r.sha, size: size(r.manifest)}, data)
  }
  return r
}

async function resolveRepo(repo: string, o: ResolveOptions, data: string): Promise<Resolved> {
  const env = o.env ?? process.env
  const h = hubOptions(o)
  const cached = await cachedSnapshot(h.cacheDir, repo, h.revision)
  if (cached && !o.refresh) {
    const manifest = await readManifest(cached.dir).catch(() => undefined)
    if (manifest && (await isStamped(cached.dir, manifest, data))) return {...cached, manifest, source: 'cache', repo}
  }
  const offline = env.HF_HUB_OFFLINE === '1' || env.HF_HUB_OFFLINE === 'true'
  if (!offline) {
    try {
      const got = await downloadSnapshot(repo, h)
      await verifyDownloaded(repo, got.dir, got.sha, got.manifest, h, data)
      return {dir: got.dir, manifest: got.manifest, source: 'hub', repo, sha: got.sha}
    } catch (err) {
      const known = hubError(err, repo, h.endpoint)
      if (known) throw known
      if (!cached) {
        throw new SplashError(
          'hub_unreachable', 'unavailable',
          `cannot reach ${h.endpoint} to download ${repo} (${(err as Error).message}) and it is not in the cache (${h.cacheDir})`,
          {cause: err},
        )
      }
      o.log?.(`${h.endpoint} unreachable (${(err as Error).message}); using the cached snapshot ${cached.sha.slice(0, 12)}`)
    }
  } else if (!cached) {
    throw new SplashError('not_cached', 'not_found', `${repo} is not in the cache (${h.cacheDir}) and HF_HUB_OFFLINE is set`)
  }
  const manifest = await readManifest(cached!.dir)
  await verifyFolder(cached!.dir, manifest, data)
  return {...cached!, manifest, source: 'cache', repo}
}

/** Verifies a fresh snapshot; a bad file is named, evicted and fetched once more. */
async function verifyDownloaded(repo: string, dir: string, sha: string, m: Manifest, h: HubOptions, data: string): Promise<void> {
  if (await isStamped(dir, m, data)) return
  const problems = await checkPackage(dir, m)
  if (problems.length > 0) {
    for (const p of problems) {
      h.log?.(`${repo}: ${p.detail}; removing it from the cache and downloading it again`)
      await evict(dir, p.path)
    }
    h.progress?.start(problems.reduce((n, p) => n + m.files.find(f => f.path === p.path)!.size, 0), repo)
    try {
      for (const p of problems) await refetch(repo, sha, p.path, m.files.find(f => f.path === p.path)!.size, h)
    } finally {
      h.progress?.done()
    }
    const again = await checkPackage(dir, m)
    if (again.length > 0) throw verificationError(`${repo}@${sha.slice(0, 12)}`, again)
  }
  await stamp(dir, m, data)
}

/** `splash pull`: ask the hub, download what is missing, verify, record. */
export function pullPackage(repo: string, o: ResolveOptions = {}): Promise<Resolved> {
  if (!isRepoId(repo)) throw new SplashError('invalid_repo', 'invalid_request', `${repo}: expected a hub repo id such as owner/name`)
  return resolvePackage(repo, {...o, refresh: true})
}

/** `splash package verify`: every file of a folder, or of a repo's cached snapshot, hashed now (stamps ignored). */
export async function verifySpec(spec: string, o: ResolveOptions = {}): Promise<{dir: string; manifest: Manifest; problems: FileProblem[]}> {
  const env = o.env ?? process.env
  let dir = resolvePath(spec)
  if (!(await isDir(dir))) {
    if (!isRepoId(spec)) throw new SplashError('package_not_found', 'not_found', `${spec}: no such folder, and not a hub repo id (owner/name)`)
    const cached = await cachedSnapshot(hubCacheDir(env), spec, o.revision)
    if (!cached) throw new SplashError('not_cached', 'not_found', `${spec} is not in the cache (${hubCacheDir(env)}); run splash pull ${spec}`)
    dir = cached.dir
  }
  const manifest = await manifestOf(dir)
  const problems = await checkPackage(dir, manifest)
  if (problems.length === 0) await stamp(dir, manifest, dataDir(env))
  return {dir, manifest, problems}
}
