// The Qwen3 / Qwen3-Next (Hermes-style) tool-call form:
//   <tool_call>\n{"name": "NAME", "arguments": {…}}\n</tool_call>
// When the name comes first (as the templates teach), the call is accepted as soon as `"arguments": {`
// is read and the arguments object streams through as it is generated. Any other arrangement of the
// object is read whole at </tool_call>.

import {ToolCallParserBase} from './tool-parser.js'
import {highSurrogateTail} from './stream-markers.js'

const END_CALL = '</tool_call>'
const HEAD = /^\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*\{/

type State = 'open' | 'args' | 'close'

export class JsonToolCallParser extends ToolCallParserBase {
  private state: State = 'open'
  private depth = 0
  private inString = false
  private escaped = false

  protected beginCall(): void {
    this.state = 'open'
  }

  protected step(final: boolean): boolean {
    switch (this.state) {
      case 'open':
        return this.stepOpen(final)
      case 'args':
        return this.stepArgs(final)
      case 'close':
        return this.stepClose(final)
    }
  }

  private stepOpen(final: boolean): boolean {
    const rest = this.buf.trimStart()
    if (rest !== '' && !rest.startsWith('{')) {
      this.rejectCall()
      return true
    }
    const m = HEAD.exec(this.buf)
    if (m) {
      const name = parseJsonString(m[1]!)
      if (name === undefined || !this.tools.has(name)) {
        this.rejectCall()
        return true
      }
      this.take(m[0].length)
      this.startCall(name)
      this.argumentsDelta('{')
      this.depth = 1
      this.inString = false
      this.escaped = false
      this.state = 'args'
      return true
    }
    const end = this.buf.indexOf(END_CALL)
    if (end >= 0) return this.readWhole(end)
    if (final) this.rejectCall()
    return final
  }

  /** A call whose object is not in name-first order: parse it whole. */
  private readWhole(end: number): boolean {
    const call = parseObject(this.buf.slice(0, end))
    const name = call?.name
    let args = call?.arguments
    if (typeof args === 'string') args = parseObject(args)
    if (typeof name !== 'string' || !this.tools.has(name) || !isObject(args)) {
      this.rejectCall()
      return true
    }
    this.take(end + END_CALL.length)
    this.startCall(name)
    this.argumentsDelta(JSON.stringify(args))
    this.endCall(true)
    return true
  }

  /** Streams the arguments object up to its closing brace. */
  private stepArgs(final: boolean): boolean {
    let i = 0
    for (; i < this.buf.length && this.depth > 0; i++) {
      const c = this.buf[i]
      if (this.inString) {
        if (this.escaped) this.escaped = false
        else if (c === '\\') this.escaped = true
        else if (c === '"') this.inString = false
      } else if (c === '"') this.inString = true
      else if (c === '{' || c === '[') this.depth++
      else if (c === '}' || c === ']') this.depth--
    }
    if (this.depth > 0 && !final) i -= highSurrogateTail(this.buf.slice(0, i))
    this.argumentsDelta(this.take(i))
    if (this.depth === 0) {
      this.state = 'close'
      return true
    }
    if (final) this.endCall(false)
    return final
  }

  /** After the arguments: `}` then `</tool_call>`; anything else ends the call and is text. */
  private stepClose(final: boolean): boolean {
    const m = /^\s*\}\s*/.exec(this.buf)
    const rest = m ? this.buf.slice(m[0].length) : this.buf.trimStart()
    const complete = isObject(parseObject(this.currentArguments()))
    if (m && rest.startsWith(END_CALL)) {
      this.take(m[0].length + END_CALL.length)
      this.endCall(complete)
      return true
    }
    const partial = m ? END_CALL.startsWith(rest) : '}'.startsWith(rest)
    if (!final && partial) return false
    if (m) this.take(m[0].length)
    if (final && m && END_CALL.startsWith(rest)) this.buf = ''
    this.endCall(complete)
    return true
  }
}

function parseJsonString(body: string): string | undefined {
  try {
    return JSON.parse(`"${body}"`) as string
  } catch {
    return undefined
  }
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text)
    return isObject(value) ? value : undefined
  } catch {
    return undefined
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}
