// `splash package build SOURCE [--draft SOURCE] [--out DIR | --push owner/repo]` where a source is a checkpoint
// folder or a hub repo id. Hub sources are checked from their metadata first (hub-checkpoint.ts: architecture,
// shapes against config.json, the draft against the target), both before either download starts; then they are
// downloaded into the Hugging Face cache and built from their snapshot folders as a local checkpoint would be.
import {mkdtemp, rm, stat} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {basename, join, resolve} from 'node:path'
import {SplashError} from '../../errors.js'
import {buildPackage, draftCheck, targetPlans, type BuildOptions} from '../builder/builder.js'
import {Checkpoint} from '../builder/checkpoint.js'
import {loadFamilies} from '../builder/family.js'
import {fetchCheckpoint, prepareCheckpoint, type Prepared} from './hub-checkpoint.js'
import {knownDraft} from './known-drafts.js'
import type {Manifest, ModelConfig} from '../manifest.js'
import {isRepoId} from '../paths.js'
import type {Progress} from '../progress.js'
import {pushPackage, type PushResult} from './push.js'
import {hubOptions} from '../resolve.js'

export interface SourceBuildOptions extends Omit<BuildOptions, 'checkpoint' | 'draft' | 'out'> {
  source: string
  draft?: string
  out?: string
  push?: string
  dryRun?: boolean
  env?: NodeJS.ProcessEnv
  progress?: Progress
  /** Runs on the built folder before a push (kernel specialisation). */
  afterBuild?: (dir: string) => Promise<Manifest | void>
}

export interface SourceBuildResult {
  manifest: Manifest
  /** The package folder (absent when it was built only to be pushed). */
  out?: string
  pushed?: PushResult
}

async function isDir(p: string): Promise<boolean> {
  return !!(await stat(p).catch(() => undefined))?.isDirectory()
}

async function localSource(spec: string): Promise<string | undefined> {
  if (await isDir(spec)) return resolve(spec)
  if (isRepoId(spec)) return undefined
  throw new SplashError('checkpoint_not_found', 'not_found', `${spec}: no such folder, and not a hub repo id (owner/name)`)
}

export async function buildFromSource(o: SourceBuildOptions): Promise<SourceBuildResult> {
  if (!o.out && !o.push) throw new SplashError('invalid_flags', 'invalid_request', 'say where the package goes: --out DIR or --push owner/repo')
  const log = o.log ?? (() => undefined)
  const h = hubOptions({env: o.env, progress: o.progress, log})
  const families = await loadFamilies()
  let target: ModelConfig | undefined
  const targetDir = await localSource(o.source)
  const draftDir = o.draft ? await localSource(o.draft) : undefined
  let targetHub: Prepared | undefined
  let draftHub: Prepared | undefined
  if (targetDir) {
    const ck = await Checkpoint.open(targetDir)
    try {
      target = targetPlans(families, ck).config
    } finally {
      await ck.close()
    }
  } else {
    log(`${o.source}: checking config.json and the safetensors headers on ${h.endpoint}`)
    targetHub = await prepareCheckpoint(o.source, {...h, check: ck => void (target = targetPlans(families, ck).config)})
  }
  if (o.draft && draftDir) {
    const ck = await Checkpoint.open(draftDir)
    try {
      draftCheck(ck, target!)
    } catch (err) {
      throw err instanceof SplashError ? new SplashError(err.code, err.kind, `${o.draft}: ${err.message}`) : err
    }
    finally {
      await ck.close()
    }
  } else if (o.draft) {
    draftHub = await prepareCheckpoint(o.draft, {...h, check: ck => void draftCheck(ck, target!)})
  } else if (isRepoId(o.source) && knownDraft(o.source)) {
    log(`no --draft: ${knownDraft(o.source)} is the published DFlash draft for ${o.source} (add --draft ${knownDraft(o.source)})`)
  }
  const checkpoint = targetDir ?? (await fetchCheckpoint(targetHub!)).dir
  const draft = draftDir ?? (draftHub ? (await fetchCheckpoint(draftHub)).dir : undefined)
  const out = o.out ? resolve(o.out) : await mkdtemp(join(tmpdir(), 'splash-push-'))
  try {
    let manifest = await buildPackage({
      ...o,
      checkpoint,
      draft,
      out,
      name: o.name ?? (targetHub ? o.source : undefined),
      source: o.source && targetHub ? `${o.source}@${targetHub.c.sha.slice(0, 12)}` : basename(checkpoint),
    })
    manifest = (await o.afterBuild?.(out)) ?? manifest
    const pushed = o.push ? await pushPackage(out, o.push, {endpoint: h.endpoint, token: h.token, dryRun: o.dryRun, log}) : undefined
    return {manifest, out: o.out ? out : undefined, pushed}
  } finally {
    if (!o.out) await rm(out, {recursive: true, force: true})
  }
}
