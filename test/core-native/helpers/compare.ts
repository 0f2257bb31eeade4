// Logit comparison: max |a − b| divided by the largest |b| (so tolerances read as relative error).
export function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity
  let d = 0
  let m = 1e-12
  for (let i = 0; i < a.length; i++) {
    d = Math.max(d, Math.abs(a[i] - b[i]))
    m = Math.max(m, Math.abs(b[i]))
  }
  return Number.isFinite(d) ? d / m : Infinity
}

export function argmax(a: ArrayLike<number>): number {
  let best = 0
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i
  return best
}

export function tokensFrom(seed: number, n: number, vocab: number): number[] {
  const out: number[] = []
  let s = seed
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0
    out.push((s >>> 8) % vocab)
  }
  return out
}
