// Loading a package for serving: find it, verify it, plan memory (refusing before any load when it does
// not fit), open the native model and the family's text side, and hand both to the ModelHost.
import {readFile, stat} from 'node:fs/promises'
import {freemem, totalmem} from 'node:os'
import {join} from 'node:path'
import {mkdirSync, statfsSync} from 'node:fs'
import {createHash} from 'node:crypto'
import {PrefixDisk, PREFIX_DISK_FORMAT} from '../cache/prefix-disk.js'
import {prefixCacheRoot, trimOtherFolders} from '../cache/prefix-folders.js'
import type {Manifest} from '../package/manifest.js'
import {SplashError} from '../errors.js'
import {preflightPackage} from '../package/preflight.js'
import {planMemory, formatPlan, assertFits, assertContext, type MemoryPlan} from './memory-plan.js'
import {formatBytes} from '../config/units.js'
import {NativeModel} from '../native/native-model.js'
import {native} from '../native/native.js'
import {Engine, DEFAULT_LIMITS} from '../engine/engine.js'
import type {ModelFamily} from '../chat/family.js'
import type {ModelHost} from './model-host.js'
import type {Metrics} from '../engine/metrics.js'
import {projectRoot} from '../native/native.js'
import {readOptions} from '../config/options.js'
import {importFamily} from '../package/families.js'
import {samplingDefaultsOf} from '../engine/sampling.js'

export interface LoadOptions {
  /** A verified package folder and its manifest (src/package/resolve.ts finds and verifies them). */
  dir: string
  manifest: Manifest
  maxMemory?: number
  maxContext?: number
  log: (line: string) => void
  metrics?: Metrics
  threads?: number
}

export interface LoadedModel {
  manifest: Manifest
  plan: MemoryPlan
  model: NativeModel
  engine: Engine
  family: ModelFamily
}

/** The package `splash serve` serves when no --model is given (SPLASH_DEFAULT_PACKAGE overrides; an empty value or a
 * missing folder means none, so the server starts without a model). */
export const DEFAULT_PACKAGE_DIR = join(projectRoot, 'packages', 'default')

export function defaultPackageDir(env: NodeJS.ProcessEnv = process.env): string {
  return readOptions(env).defaultPackage ?? DEFAULT_PACKAGE_DIR
}

/** Memory the CPU backend can use: MemAvailable on Linux, else free memory. */
export async function availableMemory(): Promise<number> {
  try {
    const info = await readFile('/proc/meminfo', 'utf8')
    const m = /MemAvailable:\s+(\d+) kB/.exec(info)
    if (m) return Number(m[1]) * 1024
  } catch {
    // not Linux
  }
  return Math.min(freemem(), totalmem())
}

async function fileBytes(dir: string, files: readonly string[]): Promise<number> {
  let total = 0
  for (const f of files) total += (await stat(join(dir, f))).size
  return total
}

async function familyLoader(family: string): Promise<{load(dir: string, manifest: Manifest): Promise<ModelFamily>}> {
  const mod = await importFamily(family, 'index')
  if (typeof mod?.load !== 'function') throw new SplashError('unsupported_family', 'invalid_request', `no model family module for "${family}"`)
  return mod as {load(dir: string, manifest: Manifest): Promise<ModelFamily>}
}

/**
 * Diagnosis and tests only: SPLASH_MAX_RUNNING lowers the batch limit the plan gives, SPLASH_MAX_WAITING
 * the queue bound (default 256).
 */
export function schedulerOverrides(env: NodeJS.ProcessEnv = process.env): {maxRunning?: number; maxWaiting?: number} {
  const out: {maxRunning?: number; maxWaiting?: number} = {}
  const {maxRunning: running, maxWaiting: waiting} = readOptions(env)
  if (running !== undefined) out.maxRunning = running
  if (waiting !== undefined) out.maxWaiting = waiting
  return out
}

/**
 * Tokens one engine step may carry (decodes first, then prefill chunks). On a device backend a step's fixed costs
 * (the q4 weights are read, and for matmuls of more than 32 tokens dequantised to bf16, once per step) are large
 * next to its per-token work, so prefill chunks are larger there: on the H200 a 512-token chunk of the 27B shape
 * took 89 ms (5.75K tokens/s) where the engine's 2048-token step runs ~7.9K tokens/s. The host keeps 512, which
 * bounds how long a long prefill stalls the decodes beside it. SPLASH_TOKEN_BUDGET overrides (diagnosis).
 */
export function stepTokenBudget(onDevice: boolean, env: NodeJS.ProcessEnv = process.env): number {
  return readOptions(env).tokenBudget ?? (onDevice ? 2048 : DEFAULT_LIMITS.tokenBudget)
}

/**
 * EngineOptions.gather: on the CPU backend an idle engine waits up to an eighth of a one-sequence decode step between
 * arrivals before its first step, so that clients sent together start together (bench/results/cpu-scaling-4-clients.json);
 * a lone request's TTFT grows by that eighth. Off on a device backend (not measured there). SPLASH_GATHER overrides.
 */
export function gatherShare(onDevice: boolean, env: NodeJS.ProcessEnv = process.env): number {
  const v = readOptions(env).gather
  return (v === undefined ? !onDevice : v === 'on') ? 1 / 8 : 0
}

export async function loadModel(o: LoadOptions): Promise<LoadedModel> {
  const manifest = o.manifest
  // every tensor checked against the config first: a broken package is named file by file, tensor by tensor
  await preflightPackage(o.dir, manifest)
  // On a device backend the plan is made from the device's free memory, and --max-memory also caps the
  // backend's device allocations (weights upload, sequence state, scratch).
  const backend = native.backendInfo()
  const device = backend.deviceMemory
  const tokenBudget = stepTokenBudget(device !== null)
  const plan = planMemory({
    manifest,
    weightBytes: await fileBytes(o.dir, manifest.weights.files),
    draftBytes: manifest.draft ? await fileBytes(o.dir, manifest.draft.files) : 0,
    available: device ? device.free : await availableMemory(),
    maxMemory: o.maxMemory,
    maxContext: o.maxContext,
    memory: device ? {kind: 'device', backend: backend.backend, total: device.total} : {kind: 'host'},
    tokenBudget,
  })
  assertContext(plan, manifest, o.maxContext)
  for (const line of formatPlan(plan)) o.log(line)
  assertFits(plan)
  const model = await NativeModel.open(o.dir, plan.contextLimit, {
    threads: o.threads,
    ...(device && o.maxMemory !== undefined ? {maxMemory: o.maxMemory} : {}),
  })
  const family = await (await familyLoader(manifest.family)).load(o.dir, manifest)
  const disk = plan.cacheBytes > 0 ? openPrefixDisk(manifest, model, o.log) : undefined
  const engine = new Engine(model, {...schedulerOverrides(), tokenBudget, maxRunning: Math.min(plan.batchLimit, schedulerOverrides().maxRunning ?? Infinity)}, o.metrics, {
    cacheBytes: plan.cacheBytes,
    gather: gatherShare(device !== null),
    ...(disk ? {disk} : {}),
  })
  if (engine.maxOutputTokens !== undefined) o.log(`Output capped at ${engine.maxOutputTokens} tokens per request (SPLASH_MAX_OUTPUT_TOKENS)`)
  o.metrics?.info('splash_model_info', 'The served package and the backend it runs on', {
    package: manifest.name,
    family: manifest.family,
    quant: manifest.weights.quant,
    backend: model.info.backend,
    variant: model.info.isa,
  })
  return {manifest, plan, model, engine, family}
}

/**
 * The prefix cache's disk tier for this package on this backend: <data dir>/prefix-cache/<signature>, where the
 * signature covers the manifest (every file's sha256), the backend, its kernel variant, whether the draft is loaded
 * (SPLASH_DRAFT=off: saved rows then carry no draft context) and the native ABI, so a state is only ever read back by
 * the build and model that computed it. Budget: a quarter of the free disk, at
 * most 8 GiB. SPLASH_PREFIX_DISK=off (or SPLASH_PREFIX_CACHE=off) disables it; a folder that cannot be made only
 * means memory alone.
 */
function openPrefixDisk(manifest: Manifest, model: NativeModel, log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): PrefixDisk | undefined {
  const o = readOptions(env)
  if (o.prefixDisk === 'off' || o.prefixCacheOff) return undefined
  // on by default on the CPU backend only: on CUDA it is correct, but reading a prefix back was measured no faster
  // than the GPU prefilling it (docs/prefix-cache.md); SPLASH_PREFIX_DISK=on turns it on anyway
  if (model.info.backend !== 'cpu' && o.prefixDisk !== 'on') {
    log(`Prefix cache on disk: off on ${model.info.backend} (reading back is no faster than prefilling there; SPLASH_PREFIX_DISK=on enables it)`)
    return undefined
  }
  const signature = createHash('sha256')
    .update(JSON.stringify([manifest, model.info.backend, model.info.isa, model.info.draft !== null, native.abiVersion(), PREFIX_DISK_FORMAT]))
    .digest('hex')
    .slice(0, 24)
  const root = prefixCacheRoot(env)
  const dir = join(root, signature)
  try {
    mkdirSync(dir, {recursive: true})
    const fs = statfsSync(dir)
    const budget = Math.min(8 * 1024 ** 3, Math.floor((fs.bavail * fs.bsize) / 4))
    trimOtherFolders(root, signature, budget)
    const disk = new PrefixDisk(dir, budget)
    const st = disk.stats()
    log(`Prefix cache on disk: ${dir} (${st.snapshots} snapshots, ${formatBytes(st.bytes)} of ${formatBytes(budget)})`)
    return disk
  } catch (err) {
    log(`Prefix cache on disk: off (${err instanceof Error ? err.message : String(err)})`)
    return undefined
  }
}

/** Loads into the host: status loading → ready (or failed, rethrowing). */
export async function loadInto(host: ModelHost, o: LoadOptions): Promise<LoadedModel> {
  host.setLoading()
  try {
    const loaded = await loadModel(o)
    host.setReady(
      {
        id: loaded.manifest.name,
        contextLength: loaded.model.contextLength,
        packageContextLength: loaded.manifest.config.max_position_embeddings,
        vision: loaded.family.chat.vision !== undefined,
        created: Math.floor(Date.now() / 1000),
        ownedBy: 'splash',
        reasoningEfforts: Object.keys(loaded.manifest.reasoning.efforts),
        sampling: samplingDefaultsOf(loaded.manifest.sampling),
        reasoningDefault: loaded.manifest.reasoning.default,
      },
      loaded.engine,
      loaded.family,
    )
    return loaded
  } catch (err) {
    host.setFailed(err instanceof Error ? err.message : String(err))
    throw err
  }
}
