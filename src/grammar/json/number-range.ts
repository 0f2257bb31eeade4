// Bounded JSON numbers as EBNF: decimal strings (an optional minus, an integer part without leading zeros, an
// optional fraction of at most `fractionDigits(…)` digits, no exponent) whose exact decimal value lies within the
// bounds. That is a subset of the numbers JSON Schema allows there, and every one of them parses to a double
// inside the bounds (the bounds are doubles, and parsing rounds monotonically).
import {integerRangeEbnf} from './integer-range.js'

/** One side of a range: a finite double, and whether the bound itself is excluded. */
export interface Bound {
  value: number
  strict: boolean
}

/** Digits of a non-negative double as a plain decimal: [integer part, fraction digits without trailing zeros]. */
export function plainDecimal(x: number): [bigint, string] {
  if (!Number.isFinite(x) || x < 0) throw new RangeError(`not a finite non-negative number: ${x}`)
  const [mant, exp] = x.toExponential().split('e') as [string, string]
  const digits = mant.replace('.', '')
  const point = Number(exp) + 1 // digits before the decimal point
  const padded = point <= 0 ? '0'.repeat(1 - point) + digits : digits.padEnd(point, '0')
  const at = Math.max(1, point)
  const int = BigInt(padded.slice(0, at))
  const frac = padded.slice(at).replace(/0+$/, '')
  return [int, frac]
}

/** Fraction digits allowed: six, or one more than the bounds' own digits (so a strict range keeps a value). */
export function fractionDigits(lo: Bound, hi: Bound): number {
  const own = (b: Bound) => plainDecimal(Math.abs(b.value))[1].length
  return Math.max(6, own(lo), own(hi)) + 1
}

/**
 * An EBNF expression for the decimal numbers in the range (lo.value ≤ hi.value, non-empty), or undefined when
 * no such decimal exists (a strict range narrower than the allowed fraction digits).
 */
export function numberRangeEbnf(lo: Bound, hi: Bound): string | undefined {
  if (!Number.isFinite(lo.value) || !Number.isFinite(hi.value) || lo.value > hi.value) throw new RangeError(`bad number range ${lo.value}..${hi.value}`)
  const cap = fractionDigits(lo, hi)
  const alts: string[] = []
  if (lo.value < 0) {
    // −y, y from max(0, −hi) to −lo; "-0…" equals 0, which the range then holds (lo < 0 ≤ hi, unless hi is 0 and strict)
    const neg = positive({value: Math.max(0, -hi.value), strict: hi.value <= 0 ? hi.strict : false}, {value: -lo.value, strict: lo.strict}, cap)
    if (neg) alts.push(`"-" ${neg}`)
  }
  if (hi.value >= 0) {
    const pos = positive(lo.value >= 0 ? lo : {value: 0, strict: false}, hi, cap)
    if (pos) alts.push(pos)
  }
  return alts.length ? `( ${alts.join(' | ')} )` : undefined
}

/** Non-negative decimals from a to b (0 ≤ a.value ≤ b.value). */
function positive(a: Bound, b: Bound, cap: number): string | undefined {
  if (a.value > b.value || (a.value === b.value && (a.strict || b.strict))) return undefined
  const [ai, af] = plainDecimal(a.value)
  const [bi, bf] = plainDecimal(b.value)
  const alts: string[] = []
  const withFraction = (int: string, f: string | undefined) => f !== undefined && alts.push(f === '""' ? int : `${int} ${f}`)
  if (ai === bi) withFraction(`"${ai}"`, fraction(af, bf, a.strict, b.strict, cap))
  else {
    withFraction(`"${ai}"`, fraction(af, null, a.strict, false, cap))
    if (ai + 1n <= bi - 1n) withFraction(integerRangeEbnf(Number(ai + 1n), Number(bi - 1n)), fraction('', null, false, false, cap))
    withFraction(`"${bi}"`, fraction('', bf, false, b.strict, cap))
  }
  return alts.length ? `( ${alts.join(' | ')} )` : undefined
}

/**
 * The part after the integer: nothing (value 0) or "." and 1..cap digits, with 0.F ≥ 0.L (> when sl) and, unless
 * H is null, 0.F ≤ 0.H (< when sh). `""` when only nothing is allowed; undefined when nothing at all is.
 */
function fraction(L: string, H: string | null, sl: boolean, sh: boolean, cap: number): string | undefined {
  const zeroOk = /^0*$/.test(L) && !sl && !(H !== null && sh && /^0*$/.test(H))
  const digits = fractionDigitsEbnf(L, H, sl, sh, cap)
  if (digits === undefined) return zeroOk ? '""' : undefined
  return zeroOk ? `( "." ${digits} )?` : `"." ${digits}`
}

/** Non-empty digit strings F of at most `left` digits with 0.F within the bounds (L / H null: that side is met). */
function fractionDigitsEbnf(L: string | null, H: string | null, sl: boolean, sh: boolean, left: number): string | undefined {
  if (left <= 0) return undefined
  if (L !== null && !sl && /^0*$/.test(L)) L = null // at least zero: every digit string is
  if (L === null && H === null) return left === 1 ? '[0-9]' : `[0-9]{1,${left}}`
  const byTail = new Map<string, number[]>()
  for (let d = 0; d <= 9; d++) {
    let nl: string | null = L
    let nh: string | null = H
    if (L !== null) {
      const l0 = L.length ? Number(L[0]) : 0
      if (d < l0) continue
      nl = d > l0 ? null : L.slice(1)
    }
    if (H !== null) {
      const h0 = H.length ? Number(H[0]) : 0
      if (d > h0) continue
      nh = d < h0 ? null : H.slice(1)
    }
    // the digits may end here (the rest is 0) or go on
    const endOk = (nl === null || (/^0*$/.test(nl) && !sl)) && (nh === null || !sh || !/^0*$/.test(nh))
    const more = fractionDigitsEbnf(nl, nh, sl, sh, left - 1)
    if (!endOk && more === undefined) continue
    const tail = more === undefined ? '' : endOk ? ` ( ${more} )?` : ` ${more}`
    byTail.set(tail, [...(byTail.get(tail) ?? []), d])
  }
  if (byTail.size === 0) return undefined
  const alts = [...byTail].map(([tail, ds]) => `${digitClass(ds)}${tail}`)
  return alts.length === 1 ? alts[0] : `( ${alts.join(' | ')} )`
}

/** A character class of ascending digits, runs written as ranges. */
function digitClass(ds: number[]): string {
  if (ds.length === 1) return `"${ds[0]}"`
  let out = ''
  for (let i = 0; i < ds.length; ) {
    let j = i
    while (j + 1 < ds.length && ds[j + 1] === ds[j]! + 1) j++
    out += j > i ? `${ds[i]}-${ds[j]}` : `${ds[i]}`
    i = j + 1
  }
  return `[${out}]`
}
