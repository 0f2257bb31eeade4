// The chat page: conversations, the composer, streaming answers and the status line.
import {AuthError, apiKey, fetchModels, setApiKey, streamChat, withKey} from './api.js'
import {Store, newId} from './store.js'
import {copyText} from './markdown.js'
import {formatBytes, readAttachments, takesImages, userContent} from './attachments.js'
import {fillIcons, icon} from './icons.js'
import {statsOf} from './stats.js'
import {effortsOf} from './efforts.js'
import {$, el} from './dom.js'
import {askKey, askRename} from './dialogs.js'
import {answerParts, reasoningBlock, renderMessage} from './message-view.js'
import {renderStatusLine} from './status-line.js'

const store = new Store()
const state = {
  model: null, // {id, context_length, reasoning_efforts?}
  modelLoaded: false, // GET /v1/models has answered
  pending: [], // attachments for the next message
  active: null, // {conv, msg, controller}
}

const ui = {
  app: $('app'),
  sidebar: $('sidebar'),
  convList: $('conv-list'),
  title: $('conv-title'),
  messages: $('messages'),
  empty: $('empty'),
  form: $('composer'),
  prompt: $('prompt'),
  send: $('send'),
  stop: $('stop'),
  fileInput: $('file-input'),
  attachments: $('attachments'),
  dropHint: $('drop-hint'),
  attach: document.querySelector('label.attach'),
  help: $('composer-help'),
  system: $('system-prompt'),
  effort: $('effort'),
  announcer: $('announcer'),
  openSidebar: $('open-sidebar'),
}

function announce(text) {
  ui.announcer.textContent = ''
  requestAnimationFrame(() => (ui.announcer.textContent = text))
}

// ---------- API key dialog ----------

$('change-key').addEventListener('click', async () => {
  const key = await askKey(apiKey() ? 'Replace the API key.' : 'Enter the API key of this server.')
  if (key) {
    setApiKey(key)
    loadModel()
  }
})

// ---------- model and status line ----------

let modelRetry = null
/** GET /v1/models; while no model is served yet (still loading, or the server is restarting), asks again every few seconds. */
async function loadModel() {
  clearTimeout(modelRetry)
  try {
    const models = await withKey(fetchModels, askKey)
    state.model = models[0] ?? null
    state.modelLoaded = true
  } catch (err) {
    state.model = null
    $('st-model').textContent = err instanceof AuthError ? 'Model: API key needed' : `Model: unavailable (${err.message})`
    fillEfforts()
    if (!(err instanceof AuthError)) modelRetry = setTimeout(loadModel, 5000)
    return
  }
  if (!state.model) modelRetry = setTimeout(loadModel, 5000)
  fillEfforts()
  showAttachKinds()
  renderStatus()
}

/** The attach button, drop hint and help offer images only when the served model takes them. */
function showAttachKinds() {
  const images = takesImages(state.model)
  const what = images ? 'images or PDFs' : 'PDFs'
  ui.fileInput.accept = images ? 'image/*,application/pdf,.pdf' : 'application/pdf,.pdf'
  ui.attach.title = `Attach ${what}`
  ui.attach.querySelector('.visually-hidden').textContent = `Attach ${what}`
  ui.dropHint.textContent = `Drop ${what} to attach them`
  ui.help.textContent = `Enter sends · Shift+Enter for a new line · Esc stops · paste or drop ${images ? 'images and PDFs' : 'PDFs'} to attach them`
}

function fillEfforts() {
  const {list, default: def} = effortsOf(state.model)
  ui.effort.replaceChildren(
    el('option', {value: '', text: def ? `Default (${def})` : 'Default'}),
    ...list.map(e => el('option', {value: e, text: e})),
  )
  ui.effort.value = list.includes(store.settings.effort) ? store.settings.effort : ''
}
ui.effort.addEventListener('change', () => {
  store.settings.effort = ui.effort.value
  store.saveSettings()
})

function renderStatus() {
  renderStatusLine(state.model, state.modelLoaded, store.current())
}

// ---------- sidebar ----------

function renderSidebar() {
  const items = store.list().map(conv => {
    const name = conv.title || 'New chat'
    const current = conv.id === store.currentId
    return el(
      'li',
      {class: `conv-item${current ? ' current' : ''}`},
      el('button', {type: 'button', class: 'conv-open', 'aria-current': current ? 'true' : null, 'data-id': conv.id, text: name, title: name}),
      el('button', {type: 'button', class: 'btn icon-btn conv-rename', 'aria-label': `Rename “${name}”`, 'data-id': conv.id}, icon('pencil')),
      el('button', {type: 'button', class: 'btn icon-btn conv-delete', 'aria-label': `Delete “${name}”`, 'data-id': conv.id}, icon('trash')),
    )
  })
  ui.convList.replaceChildren(...items)
}

ui.convList.addEventListener('click', async e => {
  const button = e.target.closest('button')
  if (!button) return
  const id = button.dataset.id
  if (button.classList.contains('conv-open')) {
    openConversation(id)
    closeSidebar()
  } else if (button.classList.contains('conv-rename')) {
    const conv = store.get(id)
    const title = await askRename(conv.title || 'New chat')
    if (title) {
      store.rename(id, title)
      renderSidebar()
      renderTitle()
    }
  } else if (button.classList.contains('conv-delete')) {
    const conv = store.get(id)
    if (!confirm(`Delete “${conv.title || 'New chat'}”? This cannot be undone.`)) return
    if (state.active?.conv.id === id) state.active.controller.abort()
    store.remove(id)
    if (!store.current()) store.create()
    renderAll()
    announce('Conversation deleted')
    ui.prompt.focus()
  }
})

$('new-chat').addEventListener('click', () => {
  const conv = store.current()
  if (!conv || conv.messages.length) store.create()
  renderAll()
  closeSidebar()
  ui.prompt.focus()
})

function download(name, text) {
  const url = URL.createObjectURL(new Blob([text], {type: 'application/json'}))
  const a = el('a', {href: url, download: name})
  document.body.append(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 1000)
}
const fileSafe = s => (s || 'conversation').replace(/[^\w.-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 60) || 'conversation'
$('export-all').addEventListener('click', () => download('splash-conversations.json', store.exportJson()))
$('export-one').addEventListener('click', () => {
  const conv = store.current()
  if (conv) download(`splash-${fileSafe(conv.title)}.json`, store.exportJson(conv))
})

function openSidebar() {
  ui.app.classList.add('sidebar-open')
  ui.openSidebar.setAttribute('aria-expanded', 'true')
  $('new-chat').focus()
}
function closeSidebar() {
  if (!ui.app.classList.contains('sidebar-open')) return
  ui.app.classList.remove('sidebar-open')
  ui.openSidebar.setAttribute('aria-expanded', 'false')
}
ui.openSidebar.addEventListener('click', openSidebar)
document.querySelector('.main').addEventListener('click', e => {
  if (ui.app.classList.contains('sidebar-open') && !e.target.closest('#open-sidebar')) closeSidebar()
})
$('close-sidebar').addEventListener('click', () => {
  closeSidebar()
  ui.openSidebar.focus()
})

// ---------- conversation view ----------

function openConversation(id) {
  // A new chat left without a message is not worth keeping in the list.
  const previous = store.current()
  if (previous && previous.id !== id && previous.messages.length === 0 && state.active?.conv !== previous) store.remove(previous.id)
  store.select(id)
  renderAll()
}

function renderTitle() {
  const conv = store.current()
  ui.title.textContent = conv?.title || 'New chat'
  document.title = conv?.title ? `${conv.title} · Splash` : 'Splash'
}

function renderAll() {
  renderSidebar()
  renderTitle()
  renderConversation()
  renderStatus()
  updateComposer()
}

function renderConversation() {
  const conv = store.current()
  ui.system.value = conv?.system ?? ''
  const nodes = (conv?.messages ?? []).map((m, i) => renderMessage(conv, m, i, !!state.active))
  ui.empty.hidden = nodes.length > 0
  ui.messages.replaceChildren(ui.empty, ...nodes)
  scrollToEnd(true)
}

/** Updates one message in place: while it streams only its body changes, so focus and scroll stay put. */
function refreshMessage(conv, m) {
  if (store.currentId !== conv.id) return
  const node = ui.messages.querySelector(`[data-msg-id="${m.id}"]`)
  if (!node) return
  const stick = nearBottom()
  if (!m.streaming) {
    node.replaceWith(renderMessage(conv, m, conv.messages.indexOf(m), !!state.active))
  } else {
    const body = node.querySelector('.msg-body')
    let details = body.querySelector('details.reasoning')
    if (m.reasoning && !details) {
      details = reasoningBlock(m)
      body.prepend(details)
    } else if (details) {
      const thinking = !m.content
      details.querySelector('.reasoning-text').textContent = m.reasoning
      details.querySelector('summary').textContent = thinking ? 'Thinking…' : 'Reasoning'
      const open = m.reasoningOpen ?? thinking
      if (details.open !== open) details.open = open
    }
    body.querySelector('.answer').replaceChildren(...answerParts(m))
  }
  if (stick) scrollToEnd()
}

function nearBottom() {
  const box = ui.messages
  return box.scrollHeight - box.scrollTop - box.clientHeight < 80
}
function scrollToEnd(force = false) {
  if (force || nearBottom()) ui.messages.scrollTop = ui.messages.scrollHeight
}

ui.messages.addEventListener('click', async e => {
  const button = e.target.closest('button')
  if (!button) return
  const conv = store.current()
  if (button.classList.contains('copy-code')) {
    const code = button.closest('.code-block')?.querySelector('code')?.textContent ?? ''
    const ok = await copyText(code)
    button.textContent = ok ? 'Copied' : 'Copy failed'
    announce(ok ? 'Code copied' : 'Could not copy')
    setTimeout(() => (button.textContent = 'Copy'), 1500)
    return
  }
  const index = Number(button.dataset.index)
  if (!conv || !Number.isInteger(index)) return
  if (button.classList.contains('act-copy')) {
    const ok = await copyText(conv.messages[index]?.content ?? '')
    button.textContent = ok ? 'Copied' : 'Copy failed'
    setTimeout(() => (button.textContent = 'Copy'), 1500)
  } else if (button.classList.contains('act-regenerate')) {
    if (state.active) return
    conv.messages.splice(index, 1)
    generate(conv)
  } else if (button.classList.contains('act-edit')) {
    if (state.active) return
    startEdit(conv, index, button.closest('article'))
  }
})

function startEdit(conv, index, article) {
  const m = conv.messages[index]
  const id = `edit-${m.id}`
  const area = el('textarea', {id, class: 'edit-area', rows: 4})
  area.value = m.content ?? ''
  // Attachments can be dropped while editing (a model without vision refuses images, say).
  const kept = [...(m.attachments ?? [])]
  const chips = el('ul', {class: 'attachments', 'aria-label': 'Attachments of this message'})
  const renderChips = () =>
    chips.replaceChildren(
      ...kept.map((a, i) =>
        el('li', {class: 'chip'},
          a.kind === 'image' && a.dataUrl ? el('img', {src: a.dataUrl, alt: ''}) : icon('file'),
          el('span', {class: 'chip-name', text: a.name}),
          el('button', {
            type: 'button', class: 'btn icon-btn btn-small', 'aria-label': `Remove ${a.name}`,
            onclick: () => {
              kept.splice(i, 1)
              renderChips()
              area.focus()
            },
          }, icon('close')),
        ),
      ),
    )
  renderChips()
  const cancel = () => renderConversation()
  const save = () => {
    const text = area.value.trim()
    if (!text && !kept.length) return
    const edited = {...m, id: newId(), content: text, attachments: kept.length ? kept : undefined}
    conv.messages.splice(index, conv.messages.length - index, edited)
    generate(conv)
  }
  area.addEventListener('keydown', e => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault()
      save()
    } else if (e.key === 'Escape') {
      e.preventDefault()
      cancel()
    }
  })
  const editor = el('div', {class: 'editor'},
    el('label', {for: id, class: 'visually-hidden', text: 'Edit message'}),
    chips,
    area,
    el('div', {class: 'msg-actions'},
      el('button', {type: 'button', class: 'btn btn-primary btn-small', onclick: save, text: 'Save and resend'}),
      el('button', {type: 'button', class: 'btn btn-small', onclick: cancel, text: 'Cancel'}),
    ),
  )
  article.querySelector('.user-text')?.remove()
  article.querySelector('.msg-attachments')?.remove()
  article.querySelector('.msg-actions')?.replaceWith(editor)
  area.focus()
}

ui.system.addEventListener('change', () => {
  const conv = store.current()
  if (!conv) return
  conv.system = ui.system.value
  store.settings.lastSystem = ui.system.value
  store.saveSettings()
  store.save()
})

// ---------- composer ----------

function updateComposer() {
  const busy = !!state.active
  ui.send.hidden = busy
  ui.stop.hidden = !busy
  ui.send.disabled = busy
  for (const b of ui.messages.querySelectorAll('.act-edit, .act-regenerate')) b.disabled = busy
}

function autoGrow() {
  ui.prompt.style.height = 'auto'
  ui.prompt.style.height = `${Math.min(ui.prompt.scrollHeight + 2, Math.round(window.innerHeight * 0.4))}px`
}
ui.prompt.addEventListener('input', autoGrow)
ui.prompt.addEventListener('keydown', e => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault()
    ui.form.requestSubmit()
  }
})
document.addEventListener('keydown', e => {
  if (e.key === 'Escape' && state.active && !document.querySelector('dialog[open]')) {
    e.preventDefault()
    stop()
  } else if (e.key === 'Escape' && ui.app.classList.contains('sidebar-open')) {
    closeSidebar()
    ui.openSidebar.focus()
  }
})

ui.form.addEventListener('submit', e => {
  e.preventDefault()
  if (state.active) return
  const text = ui.prompt.value.trim()
  if (!text && state.pending.length === 0) return
  const conv = store.current() ?? store.create()
  conv.system = ui.system.value
  conv.messages.push({id: newId(), role: 'user', content: text, attachments: state.pending.length ? state.pending : undefined})
  state.pending = []
  renderPending()
  ui.prompt.value = ''
  autoGrow()
  generate(conv)
})

ui.stop.addEventListener('click', () => stop())

function stop() {
  state.active?.controller.abort()
}

function renderPending() {
  ui.attachments.replaceChildren(
    ...state.pending.map((a, i) =>
      el('li', {class: 'chip'},
        a.kind === 'image' ? el('img', {src: a.dataUrl, alt: ''}) : icon('file'),
        el('span', {class: 'chip-name', text: `${a.name} · ${formatBytes(a.size)}`}),
        el('button', {type: 'button', class: 'btn icon-btn btn-small', 'aria-label': `Remove ${a.name}`, 'data-remove': i}, icon('close')),
      ),
    ),
  )
}
ui.attachments.addEventListener('click', e => {
  const button = e.target.closest('button[data-remove]')
  if (!button) return
  state.pending.splice(Number(button.dataset.remove), 1)
  renderPending()
  ui.prompt.focus()
})

async function attachFiles(files) {
  if (!files.length) return
  const {attachments, rejected} = await readAttachments(files, {images: takesImages(state.model)})
  state.pending.push(...attachments)
  renderPending()
  if (attachments.length) announce(`${attachments.length} file${attachments.length > 1 ? 's' : ''} attached`)
  if (rejected.length) announce(rejected.join('. '))
  if (rejected.length) showNotice(rejected.join('\n'))
}
ui.fileInput.addEventListener('change', async () => {
  await attachFiles(Array.from(ui.fileInput.files ?? []))
  ui.fileInput.value = ''
  ui.prompt.focus()
})
ui.prompt.addEventListener('paste', e => {
  const files = Array.from(e.clipboardData?.files ?? [])
  if (files.length) {
    e.preventDefault()
    attachFiles(files)
  }
})
let dragDepth = 0
const hasFiles = e => Array.from(e.dataTransfer?.types ?? []).includes('Files')
window.addEventListener('dragenter', e => {
  if (!hasFiles(e)) return
  dragDepth++
  ui.dropHint.hidden = false
  ui.form.classList.add('dragging')
})
window.addEventListener('dragleave', e => {
  if (!hasFiles(e)) return
  if (--dragDepth <= 0) {
    dragDepth = 0
    ui.dropHint.hidden = true
    ui.form.classList.remove('dragging')
  }
})
window.addEventListener('dragover', e => {
  if (hasFiles(e)) e.preventDefault()
})
window.addEventListener('drop', e => {
  if (!hasFiles(e)) return
  e.preventDefault()
  dragDepth = 0
  ui.dropHint.hidden = true
  ui.form.classList.remove('dragging')
  attachFiles(Array.from(e.dataTransfer.files))
})

function showNotice(text) {
  const note = el('p', {class: 'error', role: 'alert', text})
  ui.form.prepend(note)
  setTimeout(() => note.remove(), 6000)
}
store.onQuota = partial =>
  showNotice(partial ? 'Browser storage is full: the data of the oldest attachments was dropped.' : 'Browser storage is full: this conversation could not be saved.')

// ---------- generation ----------

/** The OpenAI `messages` for a conversation (the answer being generated excluded). */
function requestMessages(conv) {
  const out = []
  if (conv.system?.trim()) out.push({role: 'system', content: conv.system})
  for (const m of conv.messages) {
    if (m.streaming) continue
    if (m.role === 'user') out.push({role: 'user', content: userContent(m.content ?? '', m.attachments)})
    else if (m.role === 'assistant' && (m.content || !m.error)) out.push({role: 'assistant', content: m.content ?? ''})
  }
  return out
}

async function generate(conv) {
  const msg = {id: newId(), role: 'assistant', content: '', reasoning: '', streaming: true}
  const body = {messages: requestMessages(conv)}
  conv.messages.push(msg)
  if (state.model?.id) body.model = state.model.id
  if (ui.effort.value) body.reasoning_effort = ui.effort.value
  const controller = new AbortController()
  state.active = {conv, msg, controller}
  store.touch(conv)
  renderAll()
  scrollToEnd(true)

  let usage = null
  let timings = null
  let finish = null
  const clock = {start: performance.now(), first: 0, end: 0}
  let scheduled = false
  const schedule = () => {
    if (scheduled) return
    scheduled = true
    requestAnimationFrame(() => {
      scheduled = false
      if (msg.streaming) refreshMessage(conv, msg)
    })
  }
  const onChunk = chunk => {
    if (chunk.usage) usage = chunk.usage
    if (chunk.timings) timings = chunk.timings
    const choice = chunk.choices?.[0]
    if (choice?.finish_reason) finish = choice.finish_reason
    const delta = choice?.delta
    if (!delta) return
    const reasoning = delta.reasoning_content ?? delta.reasoning
    if (typeof reasoning === 'string' && reasoning) msg.reasoning += reasoning
    if (typeof delta.content === 'string' && delta.content) msg.content += delta.content
    for (const call of delta.tool_calls ?? []) {
      msg.toolCalls ??= []
      const i = call.index ?? msg.toolCalls.length
      const slot = (msg.toolCalls[i] ??= {id: call.id, type: 'function', function: {name: '', arguments: ''}})
      if (call.id) slot.id = call.id
      if (call.function?.name) slot.function.name += call.function.name
      if (call.function?.arguments) slot.function.arguments += call.function.arguments
    }
    if (!clock.first && (reasoning || delta.content || delta.tool_calls)) clock.first = performance.now()
    schedule()
  }

  try {
    await withKey(() => streamChat(body, {signal: controller.signal, onChunk}), askKey)
    if (finish === 'length') msg.truncated = true
    announce('Answer complete')
  } catch (err) {
    if (controller.signal.aborted || err?.name === 'AbortError') {
      msg.stopped = true
      announce('Stopped')
    } else {
      msg.error = err instanceof AuthError ? 'The server needs an API key.' : `Error: ${err?.message ?? err}`
      announce(msg.error)
    }
  } finally {
    clock.end = performance.now()
    delete msg.streaming
    if (!msg.reasoning) delete msg.reasoning
    const stats = statsOf(usage, timings, clock)
    if (Object.keys(stats).length) msg.stats = stats
    const stopFocused = document.activeElement === ui.stop
    state.active = null
    store.touch(conv)
    if (store.currentId === conv.id) {
      refreshMessage(conv, msg)
      renderStatus()
    }
    renderSidebar()
    renderTitle()
    updateComposer()
    if (stopFocused) ui.prompt.focus()
  }
}

// ---------- start ----------

fillIcons()
fillEfforts()

if (!store.current()) {
  const recent = store.list()[0]
  if (recent) store.select(recent.id)
  else store.create()
}
// A generation cut short by a reload is kept as it was.
for (const conv of store.conversations) for (const m of conv.messages) if (m.streaming) {
  delete m.streaming
  m.stopped = true
}
renderAll()
autoGrow()
loadModel()
ui.prompt.focus()
