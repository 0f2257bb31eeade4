// Stop strings over streamed text. Text is released as soon as it cannot be the start of a stop string;
// only the longest suffix that could still begin one is held back. The stop string itself is never
// released, and nothing after it.

export interface StopResult {
  /** Text that is now safe to emit. */
  text: string
  /** Set once a stop string has been found (this push and every later one). */
  stopped?: {
    /** The stop string that matched. */
    stop: string
    /** Offset (UTF-16 units) in the whole stream where the stop string begins = length of all emitted text. */
    offset: number
  }
}

export class StopStringMatcher {
  private readonly stops: string[]
  private readonly maxLength: number
  private held = ''
  private emitted = 0
  private done: StopResult['stopped']

  constructor(stops: readonly string[]) {
    this.stops = [...new Set(stops.filter(s => s.length > 0))]
    this.maxLength = Math.max(0, ...this.stops.map(s => s.length))
  }

  get stopped(): boolean {
    return this.done !== undefined
  }

  push(delta: string): StopResult {
    if (this.done) return {text: '', stopped: this.done}
    if (this.stops.length === 0) return this.release(delta)
    const buffer = this.held + delta
    const found = this.earliest(buffer)
    if (found) {
      this.held = ''
      const text = buffer.slice(0, found.index)
      this.emitted += text.length
      this.done = {stop: found.stop, offset: this.emitted}
      return {text, stopped: this.done}
    }
    const keep = this.partialSuffix(buffer)
    this.held = buffer.slice(buffer.length - keep)
    return this.release(buffer.slice(0, buffer.length - keep))
  }

  /** End of stream: the held-back text was not a stop string after all. */
  flush(): string {
    if (this.done) return ''
    const text = this.held
    this.held = ''
    this.emitted += text.length
    return text
  }

  private release(text: string): StopResult {
    this.emitted += text.length
    return {text}
  }

  /**
   * The stop string whose match ends first in `text` (on a tie, the longer one). Ending first is what
   * a token-by-token check finds, so the answer does not depend on how the text was split.
   */
  private earliest(text: string): {index: number; stop: string} | undefined {
    let best: {index: number; stop: string} | undefined
    for (const stop of this.stops) {
      const index = text.indexOf(stop)
      if (index < 0) continue
      const end = index + stop.length
      const bestEnd = best ? best.index + best.stop.length : Infinity
      if (end < bestEnd || (end === bestEnd && stop.length > best!.stop.length)) best = {index, stop}
    }
    return best
  }

  /** Length of the longest suffix of `text` that is a proper prefix of some stop string. */
  private partialSuffix(text: string): number {
    for (let n = Math.min(this.maxLength - 1, text.length); n > 0; n--) {
      const tail = text.slice(text.length - n)
      if (this.stops.some(stop => stop.startsWith(tail))) return n
    }
    return 0
  }
}
