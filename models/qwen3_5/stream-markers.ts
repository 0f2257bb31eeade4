// What the family's streaming parsers (reasoning.ts, tool-parser*.ts) share: scanning text that arrives in pieces for
// markup (`</think>`, `<tool_call>`, `</parameter>` …) and holding back the end of a piece that could still become
// one, so a marker split across two deltas is still seen, and no surrogate pair is cut in two.

/** Length of the longest suffix of `text` that is a proper prefix of one of `markers`. */
export function partialSuffix(text: string, markers: readonly string[]): number {
  let best = 0
  for (const marker of markers) {
    for (let n = Math.min(marker.length - 1, text.length); n > best; n--) {
      if (text.endsWith(marker.slice(0, n))) {
        best = n
        break
      }
    }
  }
  return best
}

/** 1 when `text` ends in half a surrogate pair (so it is not cut from its other half), else 0. */
export function highSurrogateTail(text: string): number {
  const c = text.charCodeAt(text.length - 1)
  return c >= 0xd800 && c <= 0xdbff ? 1 : 0
}

/**
 * How much of the end of `text` to hold until more arrives: a partial marker, the markup whitespace before it (the
 * characters `space` accepts: dropped if the marker follows), and half a surrogate pair before what is held.
 */
export function heldBack(text: string, markers: readonly string[], space: (c: string) => boolean): number {
  let hold = partialSuffix(text, markers)
  while (hold < text.length && space(text[text.length - hold - 1]!)) hold++
  return hold < text.length ? hold + highSurrogateTail(text.slice(0, text.length - hold)) : hold
}
