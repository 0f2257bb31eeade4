// Integer ranges as EBNF. XGrammar's own range expressions are wrong for some bounds (0..120 lets
// 121..129 through), so JSON Schema integer bounds are written here instead: the decimal strings of
// exactly the integers in [lo, hi], without leading zeros and without "-0".

/** An EBNF expression matching the decimal forms of the integers lo..hi (both safe integers, lo ≤ hi). */
export function integerRangeEbnf(lo: number, hi: number): string {
  if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi) || lo > hi) throw new RangeError(`bad integer range ${lo}..${hi}`)
  const alts: string[] = []
  if (lo < 0) alts.push(`"-" ( ${positive(Math.max(1, -hi), -lo).join(' | ')} )`)
  if (lo <= 0 && hi >= 0) alts.push('"0"')
  if (hi > 0) alts.push(...positive(Math.max(1, lo), hi))
  return `( ${alts.join(' | ')} )`
}

/** Alternatives for a..b with 1 ≤ a ≤ b, one group per decimal length. */
function positive(a: number, b: number): string[] {
  const out: string[] = []
  for (let len = String(a).length; len <= String(b).length; len++) {
    const from = Math.max(a, 10 ** (len - 1))
    const to = Math.min(b, 10 ** len - 1)
    if (from <= to) out.push(...sameLength(String(from), String(to)))
  }
  return out
}

/** Alternatives for the digit strings x..y of one length (x ≤ y numerically). */
function sameLength(x: string, y: string): string[] {
  if (x.length === 0) return ['""']
  const rest = x.length - 1
  if (x[0] === y[0]) return sameLength(x.slice(1), y.slice(1)).map(s => seq(`"${x[0]}"`, s))
  const x0 = Number(x[0])
  const y0 = Number(y[0])
  const lowFull = /^0*$/.test(x.slice(1))
  const highFull = /^9*$/.test(y.slice(1))
  const out: string[] = []
  // the first digit's low end: x0 followed by x's tail..9…9 (or folded into the middle span)
  const midLo = lowFull ? x0 : x0 + 1
  const midHi = highFull ? y0 : y0 - 1
  if (!lowFull) out.push(...sameLength(x.slice(1), '9'.repeat(rest)).map(s => seq(`"${x0}"`, s)))
  if (midLo <= midHi) out.push(seq(digitClass(midLo, midHi), anyDigits(rest)))
  if (!highFull) out.push(...sameLength('0'.repeat(rest), y.slice(1)).map(s => seq(`"${y0}"`, s)))
  return out
}

function digitClass(lo: number, hi: number): string {
  return lo === hi ? `"${lo}"` : `[${lo}-${hi}]`
}

function anyDigits(n: number): string {
  return n === 0 ? '""' : n === 1 ? '[0-9]' : `[0-9]{${n}}`
}

function seq(head: string, tail: string): string {
  return tail === '""' ? head : `${head} ${tail}`
}
