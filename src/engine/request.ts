// The one internal generation request every API is translated into, and the events it produces.
import type {PromptMedia} from './prompt-media.js'
import type {SamplingParams, SampledToken} from './sampling.js'

export interface GenerationRequest {
  /** Prompt token ids (already rendered and tokenized by the model family). */
  prompt: Int32Array
  /** Most tokens to generate; 0 only runs the prompt (useful with prompt logprobs). */
  maxTokens: number
  sampling: SamplingParams
  /** Token ids that end the generation (EOS and friends); they are not part of the output text. */
  stopTokenIds: readonly number[]
  /** Top-N log-probabilities for each generated token (undefined: none). */
  logprobs?: number
  /** Top-N log-probabilities for each prompt token (undefined: none). */
  promptLogprobs?: number
  /**
   * Prompt positions worth a prefix-cache snapshot besides the automatic ones (e.g. where the last turn
   * starts: the next request of the conversation shares the prompt up to there).
   */
  cacheAnchors?: readonly number[]
  /** Images in the prompt: embeddings for their pad rows, M-RoPE positions, a content hash per span (prompt-media.ts). */
  media?: PromptMedia
  /** Cancels the request: its state is freed at once. */
  signal?: AbortSignal
  /**
   * A grammar the output must follow (src/grammar/ makes these). Every generated or forced token is
   * accepted by it; tokens it disallows are never sampled; it is disposed when the sequence ends.
   */
  constraint?: TokenConstraint
  /**
   * Budget-aware structured output (a response format, a forced tool call): once the tokens left in maxTokens come
   * down to the constraint's shortest way to a complete output, that way is forced (Scheduler.closeForBudget) and the
   * request finishes with 'length'. `encode` packs the closing characters into tokens; `decode` reads the output so
   * far; `shortest` is the length of the shortest complete output; `restart`, where the grammar may start over after a
   * complete output (a further tool call), the most one token can then add to the closing path (the longest of the
   * tools' shortest calls).
   */
  closeWithinBudget?: {encode: (text: string) => number[]; decode: (tokens: readonly number[]) => string; shortest: number; restart?: number}
}

/** The engine's view of a grammar matcher for one sequence. */
export interface TokenConstraint {
  /** The allowed-token mask for the next position, if computed since the last accept / rollback. */
  readonly ready: Int32Array | undefined
  /** Computes the mask for the next position (the engine awaits this while a step runs). */
  nextMask(): Promise<Int32Array>
  /** Advances by one token; false when the token is not allowed. */
  accept(token: number): boolean
  rollBack(n: number): void
  /** True once the constraint took one of its stop tokens: nothing may follow. */
  readonly terminated: boolean
  dispose(): void
  /**
   * The tokens of the shortest way from here to a complete output, 'long' when there is none within about `limit`
   * tokens, 'stuck' when it cannot be found (src/grammar/closing.ts); the state is left where it was. A way of at
   * most `within` tokens is good enough: the grammar's alternatives are compared only when the first one is longer.
   */
  closingPath?(limit: number, encode?: (text: string) => number[], before?: string, within?: number): Promise<number[] | 'long' | 'stuck'>
  /** The tokens that end the output where the grammar is complete (a forced close ends with the first). */
  readonly stopTokenIds?: readonly number[]
}

export type FinishReason = 'stop' | 'length' | 'cancelled'

export type GenerationEvent =
  | {type: 'prompt_logprobs'; entries: Array<SampledToken | null>}
  | ({type: 'token'} & SampledToken)
  | {type: 'done'; reason: FinishReason; usage: Usage}
  | {type: 'error'; error: Error}

export interface Usage {
  promptTokens: number
  completionTokens: number
  cachedTokens: number
  /**
   * Speculative decoding, when the draft was used: target verify passes, the tokens they committed
   * (acceptance length = committed / passes; accepted drafts = committed − passes) and the tokens the
   * draft proposed. Absent for plain decoding.
   */
  draft?: {passes: number; committed: number; drafted: number}
}
