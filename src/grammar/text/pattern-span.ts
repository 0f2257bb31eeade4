// The shortest and longest string a pattern matches, for deciding when a schema's minLength / maxLength add nothing
// to its pattern or format (Pydantic writes `{"format": "uri", "minLength": 1}` for a URL; OpenAPI documents put
// `minLength: 3, maxLength: 3` beside `^[A-Z]{3}$`). Only patterns as json-pattern.ts writes them (and the policy's
// format patterns) are read: anchored `^…$`, classes, groups, alternation and greedy quantifiers.
import {regexNode} from './regex.js'
import type {TextNode} from './text-grammar.js'

export interface Span {
  min: number
  /** Infinity when unbounded. */
  max: number
}

/** The lengths (in characters) of the strings `anchored` matches, or undefined when it cannot be read. */
export function patternSpan(anchored: string): Span | undefined {
  if (!anchored.startsWith('^') || !anchored.endsWith('$')) return undefined
  try {
    return span(regexNode(anchored.slice(1, -1)))
  } catch {
    return undefined
  }
}

function span(n: TextNode): Span {
  switch (n.t) {
    case 'lit': {
      const k = [...n.s].length
      return {min: k, max: k}
    }
    case 'cls':
      return {min: 1, max: 1}
    case 'seq':
      return n.items.map(span).reduce((a, b) => ({min: a.min + b.min, max: a.max + b.max}), {min: 0, max: 0})
    case 'alt': {
      const all = n.items.map(span)
      return {min: Math.min(...all.map(s => s.min)), max: Math.max(...all.map(s => s.max))}
    }
    case 'rep': {
      const inner = span(n.node)
      return {min: n.min * inner.min, max: n.max === 0 || inner.max === 0 ? 0 : n.max * inner.max}
    }
    case 'ref':
      throw new Error('a rule reference has no span of its own')
  }
}
