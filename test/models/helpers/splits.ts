// Ways to cut a string into streamed deltas: every two-way split, and seeded random multi-way splits.

/** A small seeded PRNG (mulberry32) so random splits are reproducible. */
export function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** [text[0:i], text[i:]] for every i, including the empty ends. */
export function* twoWaySplits(text: string): Generator<string[]> {
  for (let i = 0; i <= text.length; i++) yield [text.slice(0, i), text.slice(i)]
}

/** `count` random splits into 2..maxPieces pieces (pieces may be single characters). */
export function* randomSplits(text: string, count: number, seed = 1, maxPieces = 40): Generator<string[]> {
  const random = rng(seed)
  for (let k = 0; k < count; k++) {
    const pieces = 2 + Math.floor(random() * (maxPieces - 1))
    const cuts = new Set<number>()
    for (let i = 0; i < pieces - 1; i++) cuts.add(Math.floor(random() * (text.length + 1)))
    const sorted = [...cuts].sort((a, b) => a - b)
    const out: string[] = []
    let last = 0
    for (const c of sorted) {
      out.push(text.slice(last, c))
      last = c
    }
    out.push(text.slice(last))
    yield out
  }
}

/** Every character as its own delta. */
export function charSplit(text: string): string[] {
  return text.split('')
}

/** Splits an array of ids the same ways (every two-way split plus random ones). */
export function* idSplits(ids: number[], count: number, seed = 1): Generator<number[][]> {
  for (let i = 0; i <= ids.length; i++) yield [ids.slice(0, i), ids.slice(i)]
  const random = rng(seed)
  for (let k = 0; k < count; k++) {
    const out: number[][] = []
    let i = 0
    while (i < ids.length) {
      const n = 1 + Math.floor(random() * 4)
      out.push(ids.slice(i, i + n))
      i += n
    }
    yield out
  }
}
