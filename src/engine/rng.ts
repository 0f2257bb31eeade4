// A small seeded PRNG (xoshiro128**) so that a request with a seed samples the same tokens every time.

export class Rng {
  private s: Uint32Array

  constructor(seed: number) {
    // splitmix32 expands the seed into four non-zero words.
    this.s = new Uint32Array(4)
    let x = seed >>> 0
    for (let i = 0; i < 4; i++) {
      x = (x + 0x9e3779b9) >>> 0
      let z = x
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0
      this.s[i] = (z ^ (z >>> 16)) >>> 0
    }
    if (this.s[0] === 0 && this.s[1] === 0 && this.s[2] === 0 && this.s[3] === 0) this.s[0] = 1
  }

  private ahead: number[] = []

  /** Uniform in [0, 1). */
  next(): number {
    return this.ahead.length > 0 ? this.ahead.shift()! : this.draw()
  }

  /** The i-th value next() will return from now (0 = the next one), without consuming it. */
  peek(i: number): number {
    while (this.ahead.length <= i) this.ahead.push(this.draw())
    return this.ahead[i]
  }

  private draw(): number {
    const s = this.s
    const result = Math.imul(rotl(Math.imul(s[1], 5) >>> 0, 7), 9) >>> 0
    const t = (s[1] << 9) >>> 0
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = rotl(s[3], 11)
    return result / 4294967296
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0
}

export function randomSeed(): number {
  return (Math.random() * 4294967296) >>> 0
}
