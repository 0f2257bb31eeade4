// What a model family tells the builder: which checkpoint architectures it takes, how their config.json reads as
// Splash's normalised config, and how checkpoint tensors become Splash tensors (`sanitize`). Each family implements
// this in models/<family>/sanitize.ts (the only place checkpoint names are handled), found by folder through
// src/package/families.ts.
import {SplashError} from '../../errors.js'
import {MODELS_DIR, familyNames, importFamily} from '../families.js'
import type {Checkpoint, RawConfig} from './checkpoint.js'
import type {Family, ModelConfig, VisionManifest} from '../manifest.js'

/** Loads one block of consecutive rows of the output tensor (seen as 2-D), as float32. */
export type Chunk = () => Promise<Float32Array>

export interface TensorPlan {
  /** Splash name; for a linear the suffixes .weight/.scales/.biases are added by the builder. */
  name: string
  kind: 'linear' | 'f32'
  /** Logical shape: [out, in] or [E, out, in] for a linear. */
  shape: number[]
  /** Consecutive row blocks of the 2-D view [prod(shape[:-1]), shape[-1]], in order. */
  chunks: Chunk[]
  /** Set when the tensor is an unchanged copy of this checkpoint linear (its quantized bytes may pass through). */
  source?: string
  /** In a q4 package, store this linear as q8 (router, shared-expert gate). */
  q8?: boolean
  /** Store this linear bf16 whatever the package quant (vision tower). */
  keep16?: boolean
}

export interface FamilyModule {
  family: Family
  /** Hugging Face `architectures` values this family builds. */
  architectures: readonly string[]
  /** `model_type` values (used when a config has no architectures). */
  modelTypes: readonly string[]
  normalizeConfig(raw: RawConfig): ModelConfig
  sanitize(ck: Checkpoint, config: ModelConfig): TensorPlan[]
  /** The vision tower, when the checkpoint has one the family can build (null: text only). */
  vision?(ck: Checkpoint, config: ModelConfig): Promise<{vision: VisionManifest; plans: TensorPlan[]} | null>
}

/** Every family's building half (models/<family>/sanitize.{ts,js}, found by src/package/families.ts). */
export async function loadFamilies(dir = MODELS_DIR): Promise<FamilyModule[]> {
  const out: FamilyModule[] = []
  for (const name of await familyNames(dir)) {
    const mod = (await importFamily(name, 'sanitize', dir)) as {default?: FamilyModule} | undefined
    if (mod?.default?.family) out.push(mod.default)
  }
  return out
}

export function architectureOf(raw: RawConfig): {architecture: string; modelType: string} {
  const archs = raw.architectures as string[] | undefined
  return {architecture: archs?.[0] ?? '', modelType: String(raw.model_type ?? '')}
}

/** The family that builds this config, or an error that lists the supported architectures. */
export function pickFamily(families: FamilyModule[], raw: RawConfig): FamilyModule {
  const {architecture, modelType} = architectureOf(raw)
  const byArch = families.find(f => f.architectures.includes(architecture))
  const found = byArch ?? (architecture ? undefined : families.find(f => f.modelTypes.includes(modelType)))
  if (found) return found
  const supported = families.flatMap(f => f.architectures).join(', ')
  throw new SplashError(
    'unsupported_architecture',
    'invalid_request',
    `unsupported architecture ${architecture || modelType || '(none in config.json)'}; supported: ${supported}`,
  )
}
