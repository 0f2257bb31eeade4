// Reading a tool call's arguments JSON before it is complete. Anthropic clients parse the concatenated
// input_json_delta fragments as partial JSON at every step and fail on text that can never become JSON,
// so the encoder only releases fragments whose concatenation is a valid JSON prefix.

const LITERALS = ['true', 'false', 'null']

/** Completes a prefix of JSON text (open string, dangling key / colon / comma, partial literal, open brackets). */
function close(prefix: string): string[] {
  const stack: string[] = []
  let inString = false
  let escaped = false
  for (const ch of prefix) {
    if (inString) {
      if (escaped) escaped = false
      else if (ch === '\\') escaped = true
      else if (ch === '"') inString = false
      continue
    }
    if (ch === '"') inString = true
    else if (ch === '{') stack.push('}')
    else if (ch === '[') stack.push(']')
    else if (ch === '}' || ch === ']') stack.pop()
  }
  let body = prefix
  if (inString) {
    // Drop an unfinished escape (\ or \uXX) before closing the string.
    body = body.replace(/\\(u[0-9a-fA-F]{0,3})?$/, '') + '"'
  }
  body = body.trimEnd()
  const closers = stack.reverse().join('')
  const candidates = [body]
  if (body.endsWith(',')) candidates.push(body.slice(0, -1))
  if (body.endsWith(':')) candidates.push(body + 'null')
  if (/"$/.test(body)) candidates.push(body + ':null')
  const literal = /(?:^|[\s,:[{])([a-z]+)$/.exec(body)
  if (literal) {
    const full = LITERALS.find(l => l.startsWith(literal[1]))
    if (full) candidates.push(body + full.slice(literal[1].length))
  }
  if (/[-+.eE]$/.test(body)) candidates.push(body.replace(/[-+.eE]+$/, ''), body.replace(/[-+.eE]+$/, '') + (body.endsWith('-') ? '0' : ''))
  return candidates.map(c => c + closers)
}

/** True when `text` is the start of some JSON value. */
export function isJsonPrefix(text: string): boolean {
  if (text.trim() === '') return true
  return close(text).some(c => {
    try {
      JSON.parse(c)
      return true
    } catch {
      return false
    }
  })
}

/** The arguments as an object: parsed whole, else the longest completion of the prefix, else {}. */
export function parseArguments(text: string): Record<string, unknown> {
  const attempts = [text, ...close(text)]
  for (let end = text.length; attempts.length < 64 && end > 0; end = Math.max(0, end - Math.ceil(text.length / 8))) {
    attempts.push(...close(text.slice(0, end)))
  }
  for (const a of attempts) {
    try {
      const v: unknown = JSON.parse(a)
      if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>
    } catch {
      // try the next completion
    }
  }
  return {}
}
