// Feeds a tool-call parser streamed pieces and folds its events into a comparable result, checking the
// event protocol on the way (start before arguments, one open call at a time, end carries the joined deltas).
import type {ToolCallParser, ToolParseEvent} from '../../../models/qwen3_5/tool-parser.js'

export type Segment = {text: string} | {call: {index: number; id: string; name: string; arguments: string; complete: boolean}}

export function collect(parser: ToolCallParser, pieces: string[]): ToolParseEvent[] {
  const events: ToolParseEvent[] = []
  for (const piece of pieces) events.push(...parser.push(piece))
  events.push(...parser.finish())
  return events
}

export function assemble(events: ToolParseEvent[]): Segment[] {
  const out: Segment[] = []
  let open: {index: number; id: string; name: string; arguments: string; complete: boolean} | undefined
  let nextIndex = 0
  for (const e of events) {
    switch (e.type) {
      case 'text': {
        if (open) throw new Error('text inside a call')
        if (e.text === '') throw new Error('empty text event')
        const last = out.at(-1)
        if (last && 'text' in last) last.text += e.text
        else out.push({text: e.text})
        break
      }
      case 'tool_call_start':
        if (open) throw new Error('start while a call is open')
        if (e.index !== nextIndex++) throw new Error(`index ${e.index} out of order`)
        open = {index: e.index, id: e.id, name: e.name, arguments: '', complete: false}
        break
      case 'tool_call_arguments':
        if (!open || open.index !== e.index) throw new Error('arguments outside their call')
        if (e.delta === '') throw new Error('empty arguments delta')
        open.arguments += e.delta
        break
      case 'tool_call_end':
        if (!open || open.index !== e.index) throw new Error('end outside its call')
        if (e.arguments !== open.arguments) throw new Error('end arguments differ from the joined deltas')
        open.complete = e.complete
        out.push({call: open})
        open = undefined
        break
    }
  }
  if (open) throw new Error('call left open after finish')
  return out
}

/** A parser factory with deterministic ids. */
export function counterIds(): () => string {
  let n = 0
  return () => `call_${n++}`
}
