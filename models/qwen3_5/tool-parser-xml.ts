// The Qwen3.5 / Qwen3-Coder tool-call form:
//   <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n…</function>\n</tool_call>
// Arguments stream as `{"ARG": ` … `}`; a value whose schema type is string streams as JSON-escaped
// fragments while it is generated, other values are converted by type when their </parameter> arrives.

import {convertParameter, isPlainString, parameterTypes} from './tool-arguments.js'
import {ToolCallParserBase, escapeFragment} from './tool-parser.js'
import {highSurrogateTail, partialSuffix} from './stream-markers.js'

const FUNCTION = '<function='
const PARAMETER = '<parameter='
const END_PARAMETER = '</parameter>'
const END_FUNCTION = '</function>'
const END_CALL = '</tool_call>'

type State = 'open' | 'params' | 'value' | 'close'

/** Text that may end a value (with the newline before it, which is markup), for holding back while streaming. */
const VALUE_ENDS = [END_PARAMETER, PARAMETER, END_FUNCTION].flatMap(m => ['\n' + m, m])

/** Where the value in `text` ends: `</parameter>` (consumed), or the next `<parameter=` / `</function>` (left). */
function valueEnd(text: string): {at: number; consume: number} | undefined {
  let best: {at: number; consume: number} | undefined
  for (const [marker, consume] of [[END_PARAMETER, END_PARAMETER.length], [PARAMETER, 0], [END_FUNCTION, 0]] as const) {
    const at = text.indexOf(marker)
    if (at >= 0 && (!best || at < best.at)) best = {at, consume}
  }
  return best
}

/**
 * A freeform tool's `input` is text its grammar may fill with markup (a patch can hold `</parameter>` or
 * `<function=`), so it ends only where the call grammar closes it: the whole closing markup of the call.
 */
const FREEFORM_END = `\n${END_PARAMETER}\n${END_FUNCTION}\n${END_CALL}`
const FREEFORM_CLOSE = `\n${END_PARAMETER}`

/** Where a freeform value ends: the call's closing markup, or at the end of the output a cut-off part of it. */
function freeformEnd(text: string, final: boolean): {at: number; consume: number} | undefined {
  const at = text.indexOf(FREEFORM_END)
  if (at >= 0) return {at, consume: FREEFORM_CLOSE.length}
  if (!final) return undefined
  const tail = partialSuffix(text, [FREEFORM_END])
  const cut = text.length - tail
  return tail >= FREEFORM_CLOSE.length && text.startsWith(FREEFORM_CLOSE, cut) ? {at: cut, consume: FREEFORM_CLOSE.length} : undefined
}

export class XmlToolCallParser extends ToolCallParserBase {
  private state: State = 'open'
  private types = new Map<string, string[]>()
  private firstParam = true
  private valueTypes: string[] = []
  private valueStarted = false
  /** The call is to a freeform tool, and the value is its raw `input`. */
  private freeform = false
  private freeformValue = false

  protected beginCall(): void {
    this.state = 'open'
  }

  protected step(final: boolean): boolean {
    switch (this.state) {
      case 'open':
        return this.stepOpen(final)
      case 'params':
        return this.stepParams(final)
      case 'value':
        return this.stepValue(final)
      case 'close':
        return this.stepClose(final)
    }
  }

  /** After <tool_call>: `<function=NAME>` naming a known tool, or the call is text. */
  private stepOpen(final: boolean): boolean {
    const rest = this.buf.trimStart()
    const ws = this.buf.length - rest.length
    const m = /^<function=([^>\n]*)>/.exec(rest)
    if (m) {
      const name = m[1]!.trim()
      const tool = this.tools.get(name)
      if (!tool) {
        this.rejectCall()
        return true
      }
      this.take(ws + m[0].length)
      this.types = parameterTypes(tool)
      this.freeform = tool.inputGrammar !== undefined
      this.firstParam = true
      this.startCall(name)
      this.state = 'params'
      return true
    }
    if (!final && (FUNCTION.startsWith(rest) || (rest.startsWith(FUNCTION) && !/[>\n]/.test(rest)))) return false
    this.rejectCall()
    return true
  }

  /** Between parameters: the next `<parameter=ARG>`, `</function>`, or a break. */
  private stepParams(final: boolean): boolean {
    const rest = this.buf.trimStart()
    const ws = this.buf.length - rest.length
    const m = /^<parameter=([^>\n]*)>/.exec(rest)
    if (m) {
      this.take(ws + m[0].length)
      const key = m[1]!.trim()
      this.freeformValue = this.freeform && key === 'input'
      this.valueTypes = this.freeformValue ? ['string'] : (this.types.get(key) ?? [])
      const quote = isPlainString(this.valueTypes) ? '"' : ''
      this.argumentsDelta(`${this.firstParam ? '{' : ', '}${JSON.stringify(key)}: ${quote}`)
      this.firstParam = false
      this.valueStarted = false
      this.state = 'value'
      return true
    }
    if (rest.startsWith(END_FUNCTION)) {
      this.take(ws + END_FUNCTION.length)
      this.closeArguments()
      this.state = 'close'
      return true
    }
    if (rest.startsWith(END_CALL)) {
      this.take(ws + END_CALL.length)
      this.closeArguments()
      this.endCall(true)
      return true
    }
    const partial =
      [PARAMETER, END_FUNCTION, END_CALL].some(marker => marker.startsWith(rest)) ||
      (rest.startsWith(PARAMETER) && !/[>\n]/.test(rest))
    if (!final && partial) return false
    this.closeArguments()
    this.endCall(false)
    return true
  }

  /**
   * Inside a value, up to `</parameter>` (one newline after the tag and one before the end tag are
   * markup). Like other Qwen3-Coder parsers, a value the model left unclosed also ends at the next
   * `<parameter=` or at `</function>`. A freeform tool's `input` ends only at the call's closing markup.
   */
  private stepValue(final: boolean): boolean {
    if (!this.valueStarted) {
      if (this.buf === '' && !final) return false
      if (this.buf.startsWith('\n')) this.take(1)
      this.valueStarted = true
    }
    const plain = isPlainString(this.valueTypes)
    const end = this.freeformValue ? freeformEnd(this.buf, final) : valueEnd(this.buf)
    if (end || final) {
      let value = end ? this.buf.slice(0, end.at) : this.buf
      this.take(end ? end.at + end.consume : this.buf.length)
      if (end && !this.freeformValue && value.endsWith('\n')) value = value.slice(0, -1)
      this.argumentsDelta(plain ? escapeFragment(value) + '"' : convertParameter(value, this.valueTypes))
      this.state = 'params'
      return true
    }
    if (plain) {
      const hold = Math.max(partialSuffix(this.buf, this.freeformValue ? [FREEFORM_END] : VALUE_ENDS), highSurrogateTail(this.buf))
      const ready = this.buf.length - hold
      if (ready > 0) this.argumentsDelta(escapeFragment(this.take(ready)))
    }
    return false
  }

  /** After </function>: `</tool_call>` ends the call; anything else ends it too and is text. */
  private stepClose(final: boolean): boolean {
    const rest = this.buf.trimStart()
    const ws = this.buf.length - rest.length
    if (rest.startsWith(END_CALL)) {
      this.take(ws + END_CALL.length)
      this.endCall(true)
      return true
    }
    if (!final && END_CALL.startsWith(rest)) return false
    if (final) this.buf = rest.length > 0 && END_CALL.startsWith(rest) ? '' : this.buf
    this.endCall(true)
    return true
  }

  private closeArguments(): void {
    this.argumentsDelta(this.firstParam ? '{}' : '}')
  }
}
