// A grammar constraint that counts what the engine asks of the real matcher it wraps: the masks computed
// (nextMask calls that found none ready), the tokens accepted and the tokens refused (tests and
// bench/grammar-mask.ts).
import type {TokenConstraint} from '../../src/runtime/request.js'

export class CountedConstraint implements TokenConstraint {
  masks = 0
  refusals = 0
  readonly tokens: number[] = []

  constructor(private readonly inner: TokenConstraint) {}

  get ready(): Int32Array | undefined {
    return this.inner.ready
  }

  nextMask(): Promise<Int32Array> {
    if (!this.inner.ready) this.masks++
    return this.inner.nextMask()
  }

  accept(token: number): boolean {
    const ok = this.inner.accept(token)
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
