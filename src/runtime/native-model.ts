// The native engine as the scheduler's StepModel: one loaded package, its sequences and its step.
import {native, type ModelHandle, type ModelInfo, type OpenModelOptions} from './native.js'
import type {StepItem, StepModel} from './step-model.js'

export class NativeModel implements StepModel {
  private closed = false

  private constructor(
    readonly handle: ModelHandle,
    readonly info: ModelInfo,
    readonly contextLength: number,
  ) {}

  static async open(dir: string, contextLength: number, options: OpenModelOptions = {}): Promise<NativeModel> {
    // fp32 activations keep a prefill chunk and single-token decodes of the same tokens identical
    // (the int8-activation matvec is only used for decode, so it would make them differ).
    const handle = await native.openModel(dir, {int8: false, ...options})
    const info = native.modelInfo(handle)
    return new NativeModel(handle, info, Math.min(contextLength, info.maxPositionEmbeddings))
  }

  get vocabSize(): number {
    return this.info.vocabSize
  }

  createSequence(maxLength: number): number {
    return native.createSequence(this.handle, {maxLength})
  }

  freeSequence(seq: number): void {
    if (!this.closed) native.freeSequence(this.handle, seq)
  }

  step(items: StepItem[]): Promise<Array<Float32Array | null>> {
    return native.step(this.handle, items)
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    native.closeModel(this.handle)
  }
}
