// Conversations and settings in localStorage. A conversation is
// {id, title, created, updated, system, messages: [{role, content, attachments?, reasoning?, toolCalls?, stats?, error?}]}.
// Attachments keep their data URL so a conversation can be resent; when the browser's quota runs out, the
// data of the oldest attachments is dropped (their names stay) until the conversations fit.

const CONVERSATIONS = 'splash.conversations.v1'
const CURRENT = 'splash.current'
const SETTINGS = 'splash.settings'

function read(key, fallback) {
  try {
    const raw = localStorage.getItem(key)
    return raw ? JSON.parse(raw) : fallback
  } catch {
    return fallback
  }
}

export function newId() {
  return (crypto.randomUUID?.() ?? `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`).replace(/-/g, '').slice(0, 16)
}

export class Store {
  constructor() {
    const list = read(CONVERSATIONS, [])
    this.conversations = Array.isArray(list) ? list.filter(c => c && typeof c.id === 'string' && Array.isArray(c.messages)) : []
    this.currentId = read(CURRENT, null)
    this.settings = {effort: '', lastSystem: '', ...read(SETTINGS, {})}
    this.onQuota = () => {}
  }

  /** Most recently updated first. */
  list() {
    return [...this.conversations].sort((a, b) => (b.updated ?? 0) - (a.updated ?? 0))
  }

  get(id) {
    return this.conversations.find(c => c.id === id)
  }

  current() {
    return this.get(this.currentId)
  }

  create() {
    const now = Date.now()
    const conv = {id: newId(), title: '', created: now, updated: now, system: this.settings.lastSystem ?? '', messages: []}
    this.conversations.push(conv)
    this.select(conv.id)
    return conv
  }

  select(id) {
    this.currentId = id
    localStorage.setItem(CURRENT, JSON.stringify(id))
  }

  rename(id, title) {
    const conv = this.get(id)
    if (!conv) return
    conv.title = title.trim().slice(0, 200)
    conv.updated = Date.now()
    this.save()
  }

  remove(id) {
    this.conversations = this.conversations.filter(c => c.id !== id)
    if (this.currentId === id) this.select(this.list()[0]?.id ?? null)
    this.save()
  }

  touch(conv) {
    conv.updated = Date.now()
    if (!conv.title) {
      const first = conv.messages.find(m => m.role === 'user')
      const text = (first?.content ?? '').replace(/\s+/g, ' ').trim()
      if (text) conv.title = text.length > 60 ? `${text.slice(0, 57)}…` : text
      else if (first?.attachments?.length) conv.title = first.attachments[0].name
    }
    this.save()
  }

  saveSettings() {
    localStorage.setItem(SETTINGS, JSON.stringify(this.settings))
  }

  /** Writes every conversation; on a full quota, drops the oldest attachment data and tries again. */
  save() {
    for (;;) {
      try {
        localStorage.setItem(CONVERSATIONS, JSON.stringify(this.conversations))
        return true
      } catch (err) {
        if (!this.dropOldestAttachment()) {
          console.error('splash: could not save conversations', err)
          this.onQuota(false)
          return false
        }
        this.onQuota(true)
      }
    }
  }

  dropOldestAttachment() {
    const byAge = [...this.conversations].sort((a, b) => (a.updated ?? 0) - (b.updated ?? 0))
    for (const conv of byAge) {
      for (const m of conv.messages) {
        for (const a of m.attachments ?? []) {
          if (a.dataUrl) {
            delete a.dataUrl
            a.dropped = true
            return true
          }
        }
      }
    }
    return false
  }

  /** JSON text of one conversation or of all of them. */
  exportJson(conv) {
    const payload = conv ? conv : {format: 'splash-conversations', version: 1, exported: new Date().toISOString(), conversations: this.list()}
    return JSON.stringify(payload, null, 2)
  }
}
