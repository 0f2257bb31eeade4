// What a benchmark scenario needs from an engine: count the tokens of a conversation, and run one chat turn with a
// fixed output limit, reporting time to first token and the generation phase.

export interface Message {
  role: 'system' | 'user' | 'assistant'
  content: string
}

export interface ChatResult {
  /** Client-side: request sent → first content or reasoning token. */
  ttftMs: number
  /** Client-side: request sent → response complete. */
  totalMs: number
  promptTokens: number
  /** Prompt tokens served from a cache (0 when the engine reports none). */
  cachedTokens: number
  /** Prompt phase as the engine reports it (server `timings.prompt_ms`), else the client TTFT. */
  promptMs: number
  completionTokens: number
  /** First → last generated token. */
  decodeMs: number
  /** (completionTokens − 1) / decodeMs: the generation phase alone. */
  decodeTps: number
  /** Engine-reported figures, verbatim (Splash: the `timings` object). */
  raw?: Record<string, unknown>
  /** Absolute times (ms, performance.now()) of the first and last token, for aggregate windows. */
  firstAt: number
  lastAt: number
}

export interface Driver {
  label: string
  /** Longest context the engine serves. */
  contextLength: number
  countTokens(messages: Message[]): Promise<number>
  chat(messages: Message[], maxTokens: number): Promise<ChatResult>
  close(): Promise<void>
}
