// The status line under the conversation: model, context used, speed, draft acceptance, cached tokens.
import {$} from './dom.js'

function fmt(n, digits = 1) {
  return Number(n).toLocaleString(undefined, {maximumFractionDigits: digits})
}

function setPart(id, text) {
  const node = $(id)
  node.hidden = !text
  node.textContent = text ?? ''
}

/** The status line: the model (`loaded` once the model list answered), then what the last answer of `conv` reported. */
export function renderStatusLine(model, loaded, conv) {
  // a package without a vision encoder says so (GET /v1/models lists its input modalities)
  const textOnly = Array.isArray(model?.input_modalities) && !model.input_modalities.includes('image')
  $('st-model').textContent = model ? `Model: ${model.id}${textOnly ? ' · text only' : ''}` : loaded ? 'Model: none loaded' : 'Model: …'
  const last = conv ? [...conv.messages].reverse().find(m => m.role === 'assistant' && m.stats) : undefined
  const s = last?.stats ?? {}
  const ctx = model?.context_length ?? model?.max_model_len
  if (s.promptTokens !== undefined) {
    const used = (s.promptTokens ?? 0) + (s.completionTokens ?? 0)
    setPart('st-context', ctx ? `Context: ${fmt(used, 0)} / ${fmt(ctx, 0)} (${fmt((100 * used) / ctx, 1)}%)` : `Context: ${fmt(used, 0)} tokens`)
  } else setPart('st-context', '')
  if (s.tokensPerSecond !== undefined) setPart('st-speed', `${s.estimated ? '≈' : ''}${fmt(s.tokensPerSecond)} tok/s`)
  else setPart('st-speed', '')
  if (s.acceptanceLength !== undefined) setPart('st-accept', `Acceptance length: ${fmt(s.acceptanceLength, 2)}`)
  else if (s.acceptanceRate !== undefined) setPart('st-accept', `Draft acceptance: ${fmt(100 * s.acceptanceRate, 0)}%`)
  else setPart('st-accept', '')
  setPart('st-cached', s.cachedTokens !== undefined ? `Cached: ${fmt(s.cachedTokens, 0)} tokens` : '')
}
