// Token prompts for engine tests: reproducible pseudo-random ids (xorshift32) below min(vocab, 5000).

export function randomPrompt(n: number, vocab: number, seed: number): Int32Array {
  let x = seed >>> 0 || 1
  const out = new Int32Array(n)
  for (let i = 0; i < n; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = (x >>> 0) % Math.min(vocab, 5000)
  }
  return out
}
