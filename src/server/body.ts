// How request bodies are read: JSON only (a body of another type, or one sent without a Content-Type, is a 415
// that names the header to send), in the charset its Content-Type declares (UTF-8 when it declares none), nested at
// most MAX_BODY_DEPTH levels (deeper JSON would overflow the stack of whatever walks it, from JSON.parse on).
// Size: the app's bodyLimit (BODY_LIMIT_BYTES), enforced while the body arrives; the text in it (every string but
// inline media) at most MAX_PROMPT_CHARS, and for a generating route at most MAX_CHARS_PER_TOKEN per token of the
// served context, checked before anything is tokenized (a tokenizer takes seconds per megabyte).
import fp from 'fastify-plugin'
import type {FastifyInstance, FastifyRequest} from 'fastify'
import {SplashError, errors} from '../errors.js'

/** The largest body accepted, in bytes: inline images and PDFs come base64-encoded inside the JSON. */
export const BODY_LIMIT_BYTES = 64 * 1024 * 1024
/** Deepest nesting of arrays and objects accepted in a body (JSON Schemas in tools and response formats included). */
export const MAX_BODY_DEPTH = 128

/** Most characters of text one request may carry (strings of the body, inline media left out). */
export const MAX_PROMPT_CHARS = 4 * 2 ** 20
/** More characters per token than any vocabulary's longest token (~80–130): past this a prompt cannot fit. */
export const MAX_CHARS_PER_TOKEN = 256
/** Routes that run a prompt in the served context, and the field that holds it. */
const GENERATING: Record<string, string> = {
  '/v1/chat/completions': 'messages',
  '/v1/responses': 'input',
  '/v1/messages': 'messages',
  '/v1/completions': 'prompt',
}
/** Keys whose strings are inline media (base64 or data: URLs), not text the tokenizer reads. */
const MEDIA_KEYS = new Set(['data', 'file_data', 'url', 'image_url'])

/** Characters of text in a parsed body: every string, keys included, but inline media. */
export function textChars(value: unknown, key = ''): number {
  if (typeof value === 'string') return MEDIA_KEYS.has(key) || value.startsWith('data:') ? 0 : value.length
  if (Array.isArray(value)) return value.reduce((n: number, v) => n + textChars(v, key), 0)
  if (value === null || typeof value !== 'object') return 0
  let n = 0
  for (const [k, v] of Object.entries(value)) n += k.length + textChars(v, k)
  return n
}

const SEND_JSON = 'send the body as JSON with the header Content-Type: application/json'

const unsupportedMediaType = (message: string) => new SplashError('unsupported_media_type', 'unsupported_media_type', message)

/** The TextDecoder label for a Content-Type's charset (UTF-8 when there is none), or a 415 naming it. */
export function bodyCharset(contentType: string): string {
  const m = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType)
  if (!m) return 'utf-8'
  const label = m[1]!.toLowerCase()
  try {
    // what TextDecoder knows (utf-16le/be, iso-8859-1 / windows-1252 and the other WHATWG encodings)
    return new TextDecoder(label).encoding
  } catch {
    throw unsupportedMediaType(`Unsupported charset "${m[1]}" in Content-Type; ${SEND_JSON}; charset=utf-8`)
  }
}

/** The deepest nesting of arrays and objects in JSON text, strings skipped (stops counting past `cap`). */
export function jsonDepth(text: string, cap = Infinity): number {
  let depth = 0
  let max = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++ // backslash: skip the escaped character
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) max = depth
      if (max > cap) return max
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return max
}

async function bodyPlugin(app: FastifyInstance): Promise<void> {
  const parseJson = app.getDefaultJsonParser('error', 'ignore')
  app.removeAllContentTypeParsers()
  app.addContentTypeParser(/^application\/([\w.+-]+\+)?json(\s*;.*)?$/i, {parseAs: 'buffer'}, (request: FastifyRequest, raw: Buffer, done) => {
    let text: string
    try {
      const charset = bodyCharset(request.headers['content-type'] ?? '')
      text = new TextDecoder(charset, {fatal: true}).decode(raw)
    } catch (err) {
      if (err instanceof SplashError) return done(err, undefined)
      return done(errors.invalidRequest(`The request body is not valid text in the charset its Content-Type declares (UTF-8 unless it says otherwise)`), undefined)
    }
    const depth = jsonDepth(text, MAX_BODY_DEPTH)
    if (depth > MAX_BODY_DEPTH) return done(errors.invalidRequest(`The request body nests arrays and objects more than ${MAX_BODY_DEPTH} levels deep; at most ${MAX_BODY_DEPTH} are accepted`), undefined)
    parseJson(request, text, (err, body) => {
      if (err) return done(errors.invalidRequest(`The request body is not valid JSON (${err.message})`), undefined)
      done(null, body)
    })
  })
  app.addContentTypeParser('*', (request, _payload, done) => {
    done(unsupportedMediaType(`Unsupported Content-Type "${request.headers['content-type']}": ${SEND_JSON}`), undefined)
  })
  // text past what a context can hold, refused before the tokenizer reads it
  app.addHook('preHandler', async request => {
    if (request.body === undefined || request.body === null) return
    const chars = textChars(request.body)
    const route = request.routeOptions.url ?? ''
    const param = GENERATING[route]
    const context = param ? request.server.modelHost?.engine?.model.contextLength : undefined
    const limit = context ? Math.min(MAX_PROMPT_CHARS, context * MAX_CHARS_PER_TOKEN) : MAX_PROMPT_CHARS
    if (chars <= limit) return
    const why = limit < MAX_PROMPT_CHARS ? `more than a ${context}-token context can hold (at most ${limit})` : `at most ${MAX_PROMPT_CHARS} are read in one request`
    throw new SplashError('context_length_exceeded', 'invalid_request', `prompt is too long: the request holds ${chars} characters of text, ${why}`, {param})
  })
  // a body without a Content-Type (Fastify would leave it unread)
  app.addHook('onRequest', async request => {
    if (request.headers['content-type'] !== undefined) return
    const length = Number(request.headers['content-length'] ?? 0)
    if (length > 0 || request.headers['transfer-encoding'] !== undefined) throw unsupportedMediaType(`The request has a body but no Content-Type: ${SEND_JSON}`)
  })
}

export default fp(bodyPlugin, {name: 'splash-body', fastify: '5.x'})
