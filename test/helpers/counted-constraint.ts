// A grammar constraint that counts what the engine asks of the real matcher it wraps: the masks computed
// (nextMask calls that found none ready) and the tokens accepted (tests and bench/grammar-mask.ts).
import type {TokenConstraint} from '../../src/runtime/request.js'

export class CountedConstraint implements TokenConstraint {
  masks = 0
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
