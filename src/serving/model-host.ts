// What the server is serving right now. Plugins read it; the loader sets it. No HTTP knowledge here.
import type {Engine} from '../engine/engine.js'
import type {ModelFamily} from '../chat/family.js'
import type {SamplingParams} from '../engine/sampling.js'
import {errors} from '../errors.js'

export type ModelStatus = 'none' | 'loading' | 'ready' | 'failed'

export interface ServedModel {
  /** The id clients name in `model` (the package name, e.g. "splash/tiny-chat"). */
  id: string
  /** Context window in tokens after the memory plan. */
  contextLength: number
  /** The longest context the package supports (its max_position_embeddings); absent when unknown. */
  packageContextLength?: number
  /** Whether the package has a vision encoder, so requests may carry images. */
  vision?: boolean
  /** Unix seconds when the model became ready. */
  created: number
  ownedBy: string
  /** Reasoning efforts the package offers (none = thinking off) and the default one. */
  reasoningEfforts?: string[]
  /** Sampling for the fields a request leaves unset (the package's splash.json `sampling`); empty: the APIs' defaults. */
  sampling?: Partial<SamplingParams>
  reasoningDefault?: string
}

export class ModelHost {
  status: ModelStatus = 'none'
  model: ServedModel | undefined
  failure: string | undefined
  engine: Engine | undefined
  family: ModelFamily | undefined

  setLoading(): void {
    this.status = 'loading'
  }

  setReady(model: ServedModel, engine?: Engine, family?: ModelFamily): void {
    this.model = model
    this.engine = engine
    this.family = family
    this.status = 'ready'
  }

  /** The engine and family of the served model, or a 503 / 404 SplashError when there is none. */
  serving(requestedModel?: string): {model: ServedModel; engine: Engine; family: ModelFamily} {
    if (!this.ready || !this.model || !this.engine || !this.family) throw errors.notReady()
    if (requestedModel !== undefined && requestedModel !== '' && !this.matches(requestedModel)) {
      throw errors.modelNotFound(requestedModel, this.model.id)
    }
    return {model: this.model, engine: this.engine, family: this.family}
  }

  setFailed(reason: string): void {
    this.status = 'failed'
    this.failure = reason
  }

  get ready(): boolean {
    return this.status === 'ready'
  }

  /** True when `name` (as a client sent it) designates the served model. */
  matches(name: string): boolean {
    return this.model !== undefined && name === this.model.id
  }
}
