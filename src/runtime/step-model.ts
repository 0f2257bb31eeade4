// What the scheduler needs from a loaded model: sequences and one batched step. The native engine
// implements it (src/runtime/native-model.ts); nothing here knows about the addon.

export interface StepItem {
  seq: number
  tokens: Int32Array
  /** Which rows of logits to return for this item. */
  logits: 'none' | 'last' | 'all'
}

export interface StepModel {
  readonly vocabSize: number
  /** Longest sequence (prompt + output) the model can hold after the memory plan. */
  readonly contextLength: number
  createSequence(maxLength: number): number
  freeSequence(seq: number): void
  /** One forward pass over every item; returns for each item its logits rows ([rows × vocab]) or null. */
  step(items: StepItem[]): Promise<Array<Float32Array | null>>
}
