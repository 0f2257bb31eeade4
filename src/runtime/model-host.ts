// What the server is serving right now. Plugins read it; the loader sets it. No HTTP knowledge here.

export type ModelStatus = 'none' | 'loading' | 'ready' | 'failed'

export interface ServedModel {
  /** The id clients name in `model` (the package name, e.g. "splash/tiny-chat"). */
  id: string
  /** Context window in tokens after the memory plan. */
  contextLength: number
  /** Unix seconds when the model became ready. */
  created: number
  ownedBy: string
}

export class ModelHost {
  status: ModelStatus = 'none'
  model: ServedModel | undefined
  failure: string | undefined

  setLoading(): void {
    this.status = 'loading'
  }

  setReady(model: ServedModel): void {
    this.model = model
    this.status = 'ready'
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
