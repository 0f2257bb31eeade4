// What a structural tag (a family's tool-call form, models/qwen3_5/tool-grammar.ts) tells the closing walk
// (closing.ts) about its own shape, which the matcher alone does not: its fixed texts, and the texts its top-level
// alternatives (one tag per tool) begin with. The fixed texts let the walk leave a free part (a raw XML value ends
// at `\n</parameter>\n`, which the walk's preferred characters would never reach) and skip optional parts; the
// starts let it compare the tools' calls, so the shortest call is the one closed.
import type {StructuralTagFormat} from '@mlc-ai/web-xgrammar'

export interface ClosingHints {
  /**
   * Fixed texts that end a free part (a tag's end, a constant right after a value): the walk tries them, whole, at
   * every step before any character; later in the grammar first.
   */
  closers: readonly string[]
  /**
   * The other fixed texts (a tag's begin, a parameter's opening): taken whole where the walk would write their first
   * character anyway, outside strings (so that they never stand in for a free part's characters); later in the
   * grammar first (a later parameter skips the optional ones before it).
   */
  openers: readonly string[]
  /** What each top-level alternative begins with, where there are several (a tag's begin). */
  starts: readonly string[]
}

export const NO_HINTS: ClosingHints = {closers: [], openers: [], starts: []}

export function closingHints(format: StructuralTagFormat): ClosingHints {
  const closers: string[] = []
  const openers: string[] = []
  const visit = (f: StructuralTagFormat): void => {
    switch (f.type) {
      case 'const_string':
        openers.push(f.value)
        return
      case 'tag':
        openers.push(f.begin)
        visit(f.content)
        closers.push(f.end)
        return
      case 'sequence':
        f.elements.forEach((e, i) => {
          // a constant right after a value ends it
          if (e.type === 'const_string' && i > 0 && f.elements[i - 1]!.type !== 'const_string') closers.push(e.value)
          else visit(e)
        })
        return
      case 'or':
        f.elements.forEach(visit)
        return
      case 'tags_with_separator':
      case 'triggered_tags':
        f.tags.forEach(visit)
        if (f.type === 'tags_with_separator') openers.push(f.separator)
        return
      default:
        return
    }
  }
  visit(format)
  // single characters are left to the walk
  const texts = (list: string[]) => [...new Set(list.reverse())].filter(s => s.length > 1)
  return {closers: texts(closers), openers: texts(openers), starts: topStarts(format)}
}

/** The begins of the format's top-level alternatives (none where there is one way to start). */
function topStarts(format: StructuralTagFormat): string[] {
  const tags = format.type === 'tags_with_separator' ? format.tags : format.type === 'or' ? format.elements : []
  const begins = tags.map(t => (t.type === 'tag' ? t.begin : t.type === 'const_string' ? t.value : undefined))
  if (begins.some(b => b === undefined)) return []
  const starts = [...new Set(begins as string[])]
  return starts.length > 1 ? starts : []
}
