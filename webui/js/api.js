// Talking to the server: the API key (asked for on a 401, kept in localStorage, sent as a Bearer token),
// GET /v1/models, and POST /v1/chat/completions read as an OpenAI server-sent-event stream.

const KEY_STORAGE = 'splash.apiKey'

export class AuthError extends Error {
  constructor(message) {
    super(message)
    this.name = 'AuthError'
  }
}

export class ApiError extends Error {
  constructor(message, status, body) {
    super(message)
    this.name = 'ApiError'
    this.status = status
    this.body = body
  }
}

export function apiKey() {
  try {
    return localStorage.getItem(KEY_STORAGE) || ''
  } catch {
    return ''
  }
}

export function setApiKey(key) {
  if (key) localStorage.setItem(KEY_STORAGE, key)
  else localStorage.removeItem(KEY_STORAGE)
}

/** Resolves an API path against the page's own address, so the page also works behind a path prefix. */
export function apiUrl(path) {
  return new URL(path, document.baseURI).href
}

function headers(extra = {}) {
  const h = {...extra}
  const key = apiKey()
  if (key) h.authorization = `Bearer ${key}`
  return h
}

async function errorFrom(response) {
  let body
  let message = `${response.status} ${response.statusText}`.trim()
  try {
    body = await response.json()
    const e = body && (body.error ?? body)
    if (e && typeof e.message === 'string') message = e.message
  } catch {
    // not JSON
  }
  if (response.status === 401) return new AuthError(message)
  return new ApiError(message, response.status, body)
}

/**
 * Calls `request()` and, when the server answers 401, asks for the key once (`askKey(reason)` resolves to
 * the key, or to null when the user cancels) and tries again.
 */
export async function withKey(request, askKey) {
  for (;;) {
    try {
      return await request()
    } catch (err) {
      if (!(err instanceof AuthError)) throw err
      const reason = apiKey() ? 'The server refused this key. Enter the right one.' : 'This server needs an API key.'
      const key = await askKey(reason)
      if (!key) throw err
      setApiKey(key)
    }
  }
}

/** GET /v1/models: the served model, with its context length and reasoning efforts when it reports them. */
export async function fetchModels() {
  const response = await fetch(apiUrl('v1/models'), {headers: headers()})
  if (!response.ok) throw await errorFrom(response)
  const body = await response.json()
  return Array.isArray(body.data) ? body.data : []
}

/**
 * POST /v1/chat/completions with stream:true. Calls `onChunk(chunk)` for every JSON chunk of the stream
 * and resolves when the stream ends ([DONE] or end of body). Aborting `signal` cancels the request; the
 * server stops generating when the connection closes.
 */
export async function streamChat(body, {signal, onChunk}) {
  const response = await fetch(apiUrl('v1/chat/completions'), {
    method: 'POST',
    headers: headers({'content-type': 'application/json', accept: 'text/event-stream'}),
    body: JSON.stringify({...body, stream: true, stream_options: {include_usage: true}}),
    signal,
  })
  if (!response.ok) throw await errorFrom(response)
  if (!response.body) throw new ApiError('The server sent no stream', response.status)
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
  const parser = new SseParser()
  for (;;) {
    const {value, done} = await reader.read()
    if (done) break
    for (const data of parser.push(value)) {
      if (data === '[DONE]') {
        await reader.cancel().catch(() => {})
        return
      }
      let chunk
      try {
        chunk = JSON.parse(data)
      } catch {
        continue
      }
      if (chunk && chunk.error) throw new ApiError(chunk.error.message ?? 'The server reported an error', 200, chunk)
      onChunk(chunk)
    }
  }
  for (const data of parser.flush()) {
    if (data === '[DONE]') return
    try {
      onChunk(JSON.parse(data))
    } catch {
      // an incomplete last event
    }
  }
}

/** Splits a server-sent-event text stream into the data of each event (multi-line data joined by \n). */
export class SseParser {
  constructor() {
    this.buffer = ''
    this.data = []
  }

  push(text) {
    this.buffer += text
    const out = []
    let nl
    while ((nl = this.buffer.search(/\r\n|\r|\n/)) !== -1) {
      if (nl === this.buffer.length - 1 && this.buffer.endsWith('\r')) break // maybe the first half of \r\n
      const line = this.buffer.slice(0, nl)
      const sep = this.buffer.startsWith('\r\n', nl) ? 2 : 1
      this.buffer = this.buffer.slice(nl + sep)
      this.line(line, out)
    }
    return out
  }

  flush() {
    const out = []
    if (this.buffer) this.line(this.buffer, out)
    this.buffer = ''
    this.line('', out)
    return out
  }

  line(line, out) {
    if (line === '') {
      if (this.data.length) out.push(this.data.join('\n'))
      this.data = []
    } else if (line.startsWith('data:')) {
      this.data.push(line.slice(5).replace(/^ /, ''))
    }
    // comments (":") and other fields (event:, id:, retry:) are ignored
  }
}
