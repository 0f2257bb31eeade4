// `splash package build`: a Hugging Face or MLX checkpoint folder (and optionally a DFlash draft) → a Splash
// package. The family module (models/<family>/sanitize.ts) reads the config and maps the names; this file streams
// the tensors through the quantizer into model.safetensors / draft.safetensors, copies tokenizer and template, and
// writes splash.json.
import {mkdir} from 'node:fs/promises'
import {basename, resolve} from 'node:path'
import {SplashError} from '../../errors.js'
import {Checkpoint} from './checkpoint.js'
import {draftConfigOf, draftPlans} from './draft.js'
import {architectureOf, loadFamilies, pickFamily, type FamilyModule, type TensorPlan} from './family.js'
import {draftLayout, modelLayout, type LayoutEntry} from '../layout.js'
import {finishPackage} from './finish.js'
import {DEFAULT_REASONING, draftConfigProblem, type Manifest, type ModelConfig, type Quant} from '../manifest.js'
import {copyTokenizer, samplingDefaults} from './tokenizer-files.js'
import {builderId} from '../version.js'
import {shardNames, shardPlans, writePlans} from './weights.js'

export interface BuildOptions {
  checkpoint: string
  out: string
  quant: Quant
  draft?: string
  /** Model name clients use; default: the checkpoint folder's name. */
  name?: string
  /** Largest weights file in bytes (default 20 GiB; the hub takes files up to 50 GB). */
  shardSize?: number
  /** Where the checkpoint came from, for provenance (default: the folder's name); a hub build gives repo@commit. */
  source?: string
  log?: (line: string) => void
}

export const WEIGHTS_FILE = 'model.safetensors'
export const DRAFT_FILE = 'draft.safetensors'
const DEFAULT_SHARD = 20 * 1024 ** 3

export async function buildPackage(o: BuildOptions): Promise<Manifest> {
  const log = o.log ?? (() => undefined)
  const families = await loadFamilies()
  const out = resolve(o.out)
  const ck = await Checkpoint.open(o.checkpoint)
  let manifest: Omit<Manifest, 'files'>
  try {
    const {family, config, plans, architecture, modelType} = targetPlans(families, ck)
    const vis = family.vision ? await family.vision(ck, config) : null
    if (vis) plans.push(...vis.plans)
    await mkdir(out, {recursive: true})
    const shards = shardPlans(plans, o.quant, o.shardSize ?? DEFAULT_SHARD)
    const files = shardNames(shards.length)
    log(`${family.family} (${architecture || modelType}): ${plans.length} tensors → ${out}/${files.length === 1 ? files[0] : `${files.length} files`} (${o.quant})`)
    let done = 0
    let last = 0
    const res = {passedThrough: 0}
    for (let s = 0; s < shards.length; s++) {
      const r = await writePlans(`${out}/${files[s]}`, shards[s], o.quant, {
        checkpoint: ck,
        progress: () => {
          const pct = Math.floor((100 * ++done) / plans.length)
          if (pct >= last + 10 || done === plans.length) log(`  ${done}/${plans.length} tensors`)
          if (pct >= last + 10) last = pct
        },
      })
      res.passedThrough += r.passedThrough
    }
    if (res.passedThrough > 0) log(`  ${res.passedThrough} quantized tensors copied unchanged`)
    const unused = ck.unused()
    if (vis) log(`vision tower: ${vis.vision.config.depth} blocks, hidden ${vis.vision.config.hidden_size} (bf16)`)
    if (unused.size > 0) log(`not in the package: ${[...unused].map(([k, n]) => `${k}.* (${n})`).join(', ')}`)
    const tokenizer = await copyTokenizer(ck, out)
    const sampling = await samplingDefaults(ck)
    const name = o.name ?? basename(resolve(o.checkpoint))
    manifest = {
      format: 1,
      name,
      family: family.family,
      architecture: architecture || modelType,
      config,
      tokenizer,
      reasoning: DEFAULT_REASONING,
      ...(sampling ? {sampling} : {}),
      weights: {files, quant: o.quant, group_size: 64},
      draft: null,
      vision: vis?.vision ?? null,
      kernels: [],
      provenance: {source: o.source ?? basename(resolve(o.checkpoint)), builder: builderId(), kind: 'converted'},
    }
  } finally {
    await ck.close()
  }
  if (o.draft) manifest.draft = await buildDraft(o.draft, out, o.quant, manifest.config, log)
  else log('no --draft: the package has no draft (speculative decoding off)')
  return finishPackage(out, manifest)
}

/** The family, normalised config and tensor plans of a target checkpoint, its shapes checked against its config
 *  (run on the real checkpoint by the build, and on the safetensors headers alone before a hub download). */
export function targetPlans(families: FamilyModule[], ck: Checkpoint) {
  const family = pickFamily(families, ck.config)
  const {architecture, modelType} = architectureOf(ck.config)
  const config = family.normalizeConfig(ck.config)
  const plans = family.sanitize(ck, config)
  config.tie_word_embeddings = !plans.some(p => p.name === 'lm_head')
  const embed = plans.find(p => p.name === 'embed_tokens')!
  config.vocab_size = embed.shape[0]
  const why = shapeProblem(plans, modelLayout(config))
  if (why) throw new SplashError('invalid_checkpoint', 'invalid_request', `${why} (config.json: hidden_size ${config.hidden_size}, ${config.num_hidden_layers} layers)`)
  return {family, config, plans, architecture, modelType}
}

/** The draft config and tensor plans of a DFlash checkpoint, checked against the target it is built with. */
export function draftCheck(ck: Checkpoint, target: ModelConfig) {
  const config = draftConfigOf(ck.config)
  const targetLayers = target.num_hidden_layers
  const bad = config.target_layer_ids.find(l => l >= targetLayers)
  if (bad !== undefined) {
    throw new SplashError('invalid_checkpoint', 'invalid_request', `draft taps layer ${bad} but the target has ${targetLayers} layers (a draft for another target?)`)
  }
  const why = draftConfigProblem(config, target.vocab_size)
  if (why) throw new SplashError('invalid_checkpoint', 'invalid_request', `draft config.json: ${why}`)
  const plans = draftPlans(ck, config)
  const codebook = plans.find(p => p.name === 'candidate_selector.successor_codebook')
  if (codebook && codebook.shape[0] !== target.vocab_size) {
    throw new SplashError('invalid_checkpoint', 'invalid_request', `draft selector codebooks have ${codebook.shape[0]} rows for a vocabulary of ${target.vocab_size}`)
  }
  const fc = plans.find(p => p.name === 'fc')!
  const want = config.target_layer_ids.length * target.hidden_size
  if (fc.shape[1] !== want) {
    throw new SplashError(
      'invalid_checkpoint', 'invalid_request',
      `draft fc takes ${fc.shape[1]} features but ${config.target_layer_ids.length} taps of this target (hidden ${target.hidden_size}) give ${want}: a draft for another target`,
    )
  }
  const shapes = shapeProblem(plans, draftLayout(config, target.hidden_size, target.vocab_size))
  if (shapes) throw new SplashError('invalid_checkpoint', 'invalid_request', `draft: ${shapes}`)
  return {config, plans}
}

async function buildDraft(dir: string, out: string, quant: Quant, target: ModelConfig, log: (l: string) => void) {
  const ck = await Checkpoint.open(dir)
  try {
    const {config, plans} = draftCheck(ck, target)
    const kind = config.conv_kernel_size !== null || config.selector_rank !== null ? 'DFlash 2' : 'DFlash'
    log(`draft (${kind}): ${config.num_hidden_layers} layers, taps [${config.target_layer_ids}] → ${out}/${DRAFT_FILE}`)
    await writePlans(`${out}/${DRAFT_FILE}`, plans, quant, {checkpoint: ck})
    return {config, files: [DRAFT_FILE]}
  } finally {
    await ck.close()
  }
}

/** The first tensor whose shape is not what the config implies, as a sentence; undefined when all match. */
export function shapeProblem(plans: TensorPlan[], expected: LayoutEntry[]): string | undefined {
  const byName = new Map(plans.map(p => [p.name, p]))
  for (const e of expected) {
    const p = byName.get(e.name)
    if (!p) return `no tensor for ${e.name}`
    if (p.shape.join(',') !== e.shape.join(',')) return `${p.source ?? e.name} is [${p.shape}] where the config implies [${e.shape}]`
  }
  return undefined
}
