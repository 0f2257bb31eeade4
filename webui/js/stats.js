// What the status line shows of an answer, from the stream's `usage` (OpenAI) and `timings` (llama.cpp
// style) objects: only what the server reported, plus a tokens/s estimate from the page's own clock when the
// server gives none (marked `estimated`).

const num = v => (typeof v === 'number' && Number.isFinite(v) ? v : undefined)

/** What the status line shows, from the stream's usage and (llama.cpp-style) timings objects. */
export function statsOf(usage, timings, clock = {}) {
  const s = {}
  if (usage) {
    s.promptTokens = num(usage.prompt_tokens)
    s.completionTokens = num(usage.completion_tokens)
    s.cachedTokens = num(usage.prompt_tokens_details?.cached_tokens)
  }
  if (timings) {
    s.tokensPerSecond = num(timings.predicted_per_second)
    s.acceptanceLength = num(timings.draft_acceptance_length) ?? num(timings.acceptance_length) ?? num(timings.mean_acceptance_length)
    const drafted = num(timings.draft_n)
    const accepted = num(timings.draft_n_accepted)
    if (s.acceptanceLength === undefined && drafted && accepted !== undefined) s.acceptanceRate = accepted / drafted
    s.cachedTokens ??= num(timings.cache_n)
    s.promptTokens ??= num(timings.prompt_n)
    s.completionTokens ??= num(timings.predicted_n)
  }
  if (s.tokensPerSecond === undefined && s.completionTokens > 1 && clock.first && clock.end > clock.first) {
    s.tokensPerSecond = (s.completionTokens - 1) / ((clock.end - clock.first) / 1000)
    s.estimated = true
  }
  for (const k of Object.keys(s)) if (s[k] === undefined) delete s[k]
  return s
}
