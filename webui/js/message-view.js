// How a conversation's messages look: the user's text and attachments, the answer with its reasoning,
// tool calls and notes, and each message's actions.
import {el} from './dom.js'
import {renderMarkdown} from './markdown.js'
import {formatBytes} from './attachments.js'
import {icon} from './icons.js'

function attachmentView(a) {
  if (a.kind === 'image' && a.dataUrl) {
    return el('li', {class: 'att att-image'}, el('img', {src: a.dataUrl, alt: a.name, loading: 'lazy'}))
  }
  const note = a.dropped ? ' (not kept: storage full)' : a.size ? ` · ${formatBytes(a.size)}` : ''
  return el('li', {class: 'att att-file'}, icon(a.kind === 'pdf' ? 'file' : 'image'), `${a.name}${note}`)
}

function isLastAssistant(conv, index) {
  return index === conv.messages.length - 1 && conv.messages[index].role === 'assistant'
}

/** One message of a conversation; `busy` while an answer streams (its edit and regenerate wait). */
export function renderMessage(conv, m, index, busy) {
  const article = el('article', {class: `msg msg-${m.role}`, 'data-msg-id': m.id, 'aria-label': m.role === 'user' ? 'You' : 'Splash'})
  article.append(el('h3', {class: 'msg-role', text: m.role === 'user' ? 'You' : 'Splash'}))
  if (m.role === 'user') {
    if (m.attachments?.length) article.append(el('ul', {class: 'msg-attachments', 'aria-label': 'Attachments'}, ...m.attachments.map(attachmentView)))
    if (m.content) article.append(el('div', {class: 'user-text', text: m.content}))
    article.append(
      el('div', {class: 'msg-actions'},
        el('button', {type: 'button', class: 'btn btn-small act-edit', 'data-index': index, disabled: busy, text: 'Edit'}),
      ),
    )
  } else {
    article.append(assistantBody(m))
    const actions = el('div', {class: 'msg-actions'})
    if (m.content) actions.append(el('button', {type: 'button', class: 'btn btn-small act-copy', 'data-index': index, text: 'Copy'}))
    if (isLastAssistant(conv, index)) {
      actions.append(el('button', {type: 'button', class: 'btn btn-small act-regenerate', 'data-index': index, disabled: busy, text: 'Regenerate'}))
    }
    article.append(actions)
  }
  return article
}

export function reasoningBlock(m) {
  const thinking = m.streaming && !m.content
  const details = el('details', {class: 'reasoning', open: m.reasoningOpen ?? thinking})
  const summary = el('summary', {text: thinking ? 'Thinking…' : 'Reasoning'})
  // Only a reader's click decides the block's state from then on; otherwise it folds when the answer starts.
  summary.addEventListener('click', () => (m.reasoningOpen = !details.open))
  details.append(summary, el('div', {class: 'reasoning-text', text: m.reasoning}))
  return details
}

export function answerParts(m) {
  const parts = []
  const content = el('div', {class: 'markdown'})
  if (m.content) renderMarkdown(content, m.content)
  parts.push(content)
  if (m.streaming && !m.content && !m.reasoning) parts.push(el('p', {class: 'typing', text: 'Waiting for the model…'}))
  for (const call of m.toolCalls ?? []) {
    parts.push(
      el('div', {class: 'tool-call'},
        el('div', {class: 'tool-call-name', text: `Tool call: ${call.function?.name ?? '(unnamed)'}`}),
        el('pre', {}, el('code', {text: call.function?.arguments ?? ''})),
      ),
    )
  }
  if (m.stopped) parts.push(el('p', {class: 'note', text: 'Stopped.'}))
  else if (m.truncated) parts.push(el('p', {class: 'note', text: 'The answer reached its length limit.'}))
  else if (!m.streaming && !m.content && !m.error && !m.toolCalls?.length) parts.push(el('p', {class: 'note', text: 'The model gave no answer text.'}))
  if (m.error) parts.push(el('p', {class: 'error', role: 'alert', text: m.error}))
  return parts
}

function assistantBody(m) {
  const body = el('div', {class: 'msg-body', 'aria-busy': m.streaming ? 'true' : null})
  if (m.reasoning) body.append(reasoningBlock(m))
  body.append(el('div', {class: 'answer'}, ...answerParts(m)))
  return body
}
