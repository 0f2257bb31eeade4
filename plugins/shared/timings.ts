// The llama.cpp-style `timings` object of a finished OpenAI-shaped response (Chat Completions, Completions): prompt
// and generation time from the server's clock, tokens per second, tokens from the prefix cache, and, when the draft
// ran, its proposed and accepted tokens and the acceptance length (tokens committed per target pass).

/** One choice's counts, as the engine reports them at its end. */
export interface ChoiceCounts {
  completionTokens: number
  cachedTokens: number
  draft?: {passes: number; committed: number; drafted: number}
}

/**
 * `started`: when the request arrived; `firstTokenAt`: when the first choice produced its first token (0: none);
 * `cachedTokens`: of the prompt, taken from the prefix cache.
 */
export function timingsBody(choices: Array<ChoiceCounts | undefined>, promptTokens: number, cachedTokens: number, started: number, firstTokenAt: number) {
  const end = performance.now()
  const predicted = choices.reduce((a, c) => a + (c?.completionTokens ?? 0), 0)
  const promptMs = (firstTokenAt || end) - started
  const predictedMs = firstTokenAt ? end - firstTokenAt : 0
  const drafts = choices.map(c => c?.draft).filter(d => d !== undefined)
  const passes = drafts.reduce((a, d) => a + d.passes, 0)
  const committed = drafts.reduce((a, d) => a + d.committed, 0)
  return {
    ...(passes > 0
      ? {
          draft_n: drafts.reduce((a, d) => a + d.drafted, 0),
          draft_n_accepted: committed - passes,
          draft_acceptance_length: committed / passes,
        }
      : {}),
    prompt_n: promptTokens,
    prompt_ms: promptMs,
    cache_n: cachedTokens,
    predicted_n: predicted,
    predicted_ms: predictedMs,
    predicted_per_second: predictedMs > 0 ? (predicted / predictedMs) * 1000 : 0,
  }
}
