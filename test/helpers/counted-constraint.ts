// A grammar constraint that counts what the engine asks of the real matcher it wraps: the masks computed
// (nextMask calls that found none ready), the tokens accepted and the tokens refused (tests and
// bench/grammar-mask.ts).
import type {TokenConstraint} from '../../src/engine/request.js'

export class CountedConstraint implements TokenConstraint {
  masks = 0
  refusals = 0
  /** Wall time (ms) the engine waited for the masks it had computed, and spent in accept() (allowed or refused). */
  maskMs = 0
  acceptMs = 0
  readonly tokens: number[] = []

  constructor(private readonly inner: TokenConstraint) {}

  get ready(): Int32Array | undefined {
    return this.inner.ready
  }

  nextMask(): Promise<Int32Array> {
    if (this.inner.ready) return this.inner.nextMask()
    this.masks++
    const t0 = performance.now()
    return this.inner.nextMask().finally(() => (this.maskMs += performance.now() - t0))
  }

  accept(token: number): boolean {
    const t0 = performance.now()
    const ok = this.inner.accept(token)
    this.acceptMs += performance.now() - t0
    if (ok) this.tokens.push(token)
    else this.refusals++
    return ok
  }

  rollBack(n: number): void {
    this.inner.rollBack(n)
    this.tokens.length -= n
  }

  get terminated(): boolean {
    return this.inner.terminated
  }

  dispose(): void {
    this.inner.dispose()
  }
}
