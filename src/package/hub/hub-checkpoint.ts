// A plain checkpoint repo (config.json + safetensors + tokenizer files, no splash.json) from the hub into the Hugging
// Face cache, for `splash package build owner/repo`. Before any weights move, the metadata is checked: the repo
// exists and can be read (HF_TOKEN for private and gated repos), config.json names an architecture a family builds,
// and the tensor shapes in the safetensors headers (fetched with Range requests) match the config; the caller's
// `check` sees a checkpoint made of those headers alone (sparse stand-ins of the shards, so nothing is downloaded for
// it). Then the files stream into the cache with hub.ts's fetchFile (resuming a partial blob after a kill) and each
// is verified against the hub's hash: sha256 for LFS files, the git blob id for the others; a file that fails is
// named, evicted and fetched once more.
import {mkdir, mkdtemp, open, readFile, rm, stat, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {downloadFile, listFiles, modelInfo} from '@huggingface/hub'
import {formatBytes} from '../../config/units.js'
import {SplashError} from '../../errors.js'
import {Checkpoint} from '../builder/checkpoint.js'
import {creds, evict, fetchFile, gitOid, hubError, silenced, type Ctx, type HubOptions} from './hub.js'
import {repoFolder} from '../paths.js'
import {hashFile} from '../verify.js'

export interface RepoFile {
  path: string
  size: number
  oid: string
  /** sha256 of an LFS file. */
  sha256?: string
}

export interface CheckpointSnapshot {
  repo: string
  sha: string
  dir: string
  files: RepoFile[]
}

const KEEP = [
  /^config\.json$/, /\.safetensors$/, /^model\.safetensors\.index\.json$/, /^tokenizer\.json$/, /^tokenizer_config\.json$/,
  /^generation_config\.json$/, /^chat_template\.(jinja|json)$/, /^special_tokens_map\.json$/, /^vocab\.json$/, /^merges\.txt$/,
  /^(video_)?preprocessor_config\.json$/,
]

const fail = (repo: string, code: string, message: string) => new SplashError(code, 'invalid_request', `${repo}: ${message}`)

/** The files of the commit the build needs, from the hub's tree listing. */
async function listCheckpoint(repo: string, sha: string, o: HubOptions): Promise<RepoFile[]> {
  const out: RepoFile[] = []
  const other: string[] = []
  for await (const e of listFiles({repo, revision: sha, recursive: true, ...creds(o)})) {
    if (e.type !== 'file') continue
    if (!KEEP.some(k => k.test(e.path))) {
      other.push(e.path)
      continue
    }
    out.push({path: e.path, size: e.size, oid: String(e.oid ?? ''), sha256: e.lfs?.oid})
  }
  if (!out.some(f => f.path === 'config.json')) throw fail(repo, 'invalid_checkpoint', 'no config.json: not a model checkpoint')
  if (!out.some(f => f.path.endsWith('.safetensors'))) {
    const bin = other.some(p => /\.(bin|pt|pth|gguf)$/.test(p))
    throw fail(repo, 'invalid_checkpoint', bin ? 'only .bin/.pt/.gguf weights: Splash builds from safetensors checkpoints' : 'no *.safetensors weights')
  }
  return out
}

/** Reads one file's bytes [start, end) from the hub (a Range request). */
async function readRange(repo: string, sha: string, path: string, start: number, end: number, o: HubOptions): Promise<Buffer> {
  const blob = await downloadFile({repo, path, revision: sha, ...creds(o)})
  if (!blob) throw fail(repo, 'invalid_checkpoint', `${path} is listed but cannot be downloaded`)
  return Buffer.from(await blob.slice(start, end).arrayBuffer())
}

/** A folder of stand-ins: config.json and the index as they are, each shard its real header and then a hole. */
async function headerCheckpoint(c: Ctx, files: RepoFile[]): Promise<{ck: Checkpoint; dir: string}> {
  const dir = await mkdtemp(join(tmpdir(), 'splash-headers-'))
  try {
    for (const f of files) {
      if (f.path.endsWith('.json')) {
        if (f.path === 'config.json' || f.path === 'model.safetensors.index.json') {
          await writeFile(join(dir, f.path), await readFile(await fetchFile(c, f.path, f.size)))
        }
        continue
      }
      if (!f.path.endsWith('.safetensors')) continue
      const len = Number((await readRange(c.repo, c.sha, f.path, 0, 8, c.o)).readBigUInt64LE(0))
      if (len > 100 * 1024 * 1024 || 8 + len > f.size) throw fail(c.repo, 'invalid_checkpoint', `${f.path} has a header of ${len} bytes: not a safetensors file`)
      const header = await readRange(c.repo, c.sha, f.path, 0, 8 + len, c.o)
      await mkdir(dirname(join(dir, f.path)), {recursive: true})
      const fh = await open(join(dir, f.path), 'w')
      try {
        await fh.write(header, 0, header.length, 0)
        await fh.truncate(f.size)
      } finally {
        await fh.close()
      }
    }
    return {ck: await Checkpoint.open(dir), dir}
  } catch (err) {
    await rm(dir, {recursive: true, force: true})
    throw err
  }
}

async function verified(path: string, f: RepoFile): Promise<string | undefined> {
  if (f.sha256) {
    const {size, sha256} = await hashFile(path)
    if (size !== f.size) return `${f.path} has ${size} bytes, the hub says ${f.size}`
    if (sha256 !== f.sha256) return `${f.path} has sha256 ${sha256.slice(0, 16)}…, the hub says ${f.sha256.slice(0, 16)}…`
    return undefined
  }
  const oid = await gitOid(path)
  return oid === f.oid ? undefined : `${f.path} has git blob id ${oid.slice(0, 12)}, the hub says ${f.oid.slice(0, 12)}`
}

export interface CheckpointOptions extends HubOptions {
  /** Sees the checkpoint made of config.json and the shard headers; throws to stop before the download. */
  check?: (ck: Checkpoint) => void | Promise<void>
}

export interface Prepared {
  c: Ctx
  files: RepoFile[]
  revision: string
  /** The options the download runs with (the checks ran without the progress bar). */
  o: HubOptions
}

/** Resolves the revision, lists the files and runs `check` on the headers: everything short of the download. */
export async function prepareCheckpoint(repo: string, o: CheckpointOptions): Promise<Prepared> {
  return hubCall(repo, o, async () => {
    const revision = o.revision ?? 'main'
    const info = (await modelInfo({name: repo, revision, additionalFields: ['sha'], ...creds(o)})) as {sha?: string; gated?: unknown}
    if (info.gated && !o.token) {
      throw new SplashError('hub_unauthorized', 'authentication', `${repo} is gated on ${o.endpoint}: accept its terms there and set HF_TOKEN to a token of that account`)
    }
    const sha = String(info.sha ?? '')
    if (!/^[0-9a-f]{40}$/.test(sha)) throw new SplashError('hub_bad_answer', 'unavailable', `${o.endpoint}: no commit sha for ${repo}@${revision}`)
    const c: Ctx = {repo, sha, root: repoFolder(o.cacheDir, repo), o: {...o, progress: undefined}}
    const files = await listCheckpoint(repo, sha, o)
    const {ck, dir: stubs} = await headerCheckpoint(c, files)
    try {
      await o.check?.(ck)
    } catch (err) {
      if (err instanceof SplashError && !err.message.startsWith(repo)) throw new SplashError(err.code, err.kind, `${repo}: ${err.message}`)
      throw err
    } finally {
      await ck.close()
      await rm(stubs, {recursive: true, force: true})
    }
    return {c, files, revision, o}
  })
}

async function hubCall<T>(repo: string, o: HubOptions, fn: () => Promise<T>): Promise<T> {
  try {
    return await silenced(fn)
  } catch (err) {
    const known = hubError(err, repo, o.endpoint)
    if (known) throw known
    if (err instanceof SplashError) throw err
    throw new SplashError('hub_unreachable', 'unavailable', `cannot reach ${o.endpoint} for ${repo} (${(err as Error).message}); run again to resume`, {cause: err})
  }
}

/** Downloads (or resumes) and verifies every file of a prepared checkpoint; returns its snapshot folder. */
export async function fetchCheckpoint(p: Prepared): Promise<CheckpointSnapshot> {
  const {files, o} = p
  const c: Ctx = {...p.c, o}
  const {repo, sha} = c
  return hubCall(repo, o, async () => {
    const snapshot = join(c.root, 'snapshots', sha)
    const total = files.reduce((n, f) => n + f.size, 0)
    o.log?.(`${repo}@${sha.slice(0, 12)}: ${files.length} files, ${formatBytes(total)} → ${snapshot}`)
    o.progress?.start(total, repo)
    const bad: RepoFile[] = []
    try {
      for (const f of files) {
        const cached = (await stat(join(snapshot, f.path)).catch(() => undefined))?.size === f.size
        const path = await fetchFile(c, f.path, f.size)
        if (cached) o.progress?.add(f.size)
        const why = await verified(path, f)
        if (why) {
          o.log?.(`${repo}: ${why}; removing it from the cache and downloading it again`)
          bad.push(f)
        }
      }
    } finally {
      o.progress?.done()
    }
    for (const f of bad) {
      await evict(snapshot, f.path)
      const why = await verified(await fetchFile(c, f.path, f.size), f)
      if (why) {
        await evict(snapshot, f.path)
        throw new SplashError('verification_failed', 'invalid_request', `${repo}@${sha.slice(0, 12)}: ${why} after a second download`)
      }
    }
    await mkdir(join(c.root, 'refs'), {recursive: true})
    if (p.revision !== sha) await writeFile(join(c.root, 'refs', p.revision), sha)
    return {repo, sha, dir: snapshot, files}
  })
}
