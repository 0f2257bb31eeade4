// A JSON string with minLength / maxLength as XGrammar EBNF, written by Splash instead of XGrammar.
//
// Lengths count characters (code points) of the decoded string, as JSON Schema does. A character is one raw
// character of a JSON string (XGrammar's free-string class: anything but `"`, `\` and control characters, any
// UTF-8 character included) or one escape; `\u` escapes of surrogates are left out, since a pair of them is one
// character in the decoded string but two escapes here.
//
// Up to CHAIN_LIMIT characters the string is a chain of rules, one per character written so far. XGrammar lowers a
// bounded repetition into a similar chain, but with a lookahead that leaves most tokens to be decided at run time
// near the bound (1–8 ms a mask at 16K tokens, 4 ms at 248K, where the chain takes 0.01–0.08 ms), and its
// repetition of a group (a character or an escape) made every mask cost 17–770 ms. Past the limit a chain costs
// too much to compile (~4 ms a rule at 16K tokens, ~40 ms at 248K), so longer bounds use XGrammar's repetition of
// the raw-character class: no escapes there (docs/structured-output.md).

/** XGrammar's class of the raw characters of a free string (compiler.ts narrows it for markup-free values). */
export const FREE_STRING_CHAR = '[^\\0-\\x1f\\"\\\\\\r\\n]'

/** The escape after a backslash, surrogates excluded. */
const STRING_ESCAPE_RULE = 'splash_string_escape'
const ESCAPE = `${STRING_ESCAPE_RULE} ::= ["\\\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})`

/** Longest bound written as a chain of rules. */
export const CHAIN_LIMIT = 128

export interface StringEbnf {
  /** The expression standing for the whole string, quotes included. */
  expr: string
  /** Rules the expression refers to (the escape rule included when used). */
  rules: string[]
}

/** The JSON string (quotes included) of `min` to `max` characters (max undefined: no upper bound). */
export function boundedStringEbnf(min: number, max: number | undefined): StringEbnf {
  const chain = lengthChain(min, max, {prefix: 'splash_len', close: '"\\""', char: next => `${FREE_STRING_CHAR} ${next} | "\\\\" ${STRING_ESCAPE_RULE} ${next}`})
  if (!chain) return {expr: `("\\"" ${FREE_STRING_CHAR}{${min},${max ?? ''}} "\\"")`, rules: []}
  return {expr: `("\\"" ${chain.start})`, rules: [ESCAPE, ...chain.rules]}
}

/** A raw character of an XML-form parameter value: no control character and no `<` (a closing marker's start). */
const RAW_CHAR = '[^\\0-\\x1f<]'

/** The raw text (an XML-form parameter value) of `min` to `max` characters, as a grammar with root `root`. */
export function boundedRawEbnf(min: number, max: number | undefined): string {
  const chain = lengthChain(min, max, {prefix: 'splash_raw_len', close: '""', char: next => `${RAW_CHAR} ${next}`})
  if (!chain) return `root ::= ${RAW_CHAR}{${min},${max ?? ''}}`
  return [`root ::= ${chain.start}`, ...chain.rules].join('\n')
}

interface ChainForm {
  /** Rule names start with it (then the bounds, then the position). */
  prefix: string
  /** What ends the text. */
  close: string
  /** One character followed by the rule `next`. */
  char: (next: string) => string
}

/** The chain of rules for `min` to `max` characters, or undefined past CHAIN_LIMIT. */
function lengthChain(min: number, max: number | undefined, form: ChainForm): {start: string; rules: string[]} | undefined {
  if (!Number.isSafeInteger(min) || min < 0 || (max !== undefined && (!Number.isSafeInteger(max) || max < min))) {
    throw new Error(`invalid string length bounds ${min}..${max}`)
  }
  const top = max ?? min
  if (top > CHAIN_LIMIT) return undefined
  const name = (i: number) => `${form.prefix}_${min}_${max ?? 'inf'}_${i}`
  const rules: string[] = []
  for (let i = 0; i <= top; i++) {
    if (i < min) rules.push(`${name(i)} ::= ${form.char(name(i + 1))}`)
    else if (max === undefined) rules.push(`${name(i)} ::= ${form.close} | ${form.char(name(i))}`)
    else if (i < max) rules.push(`${name(i)} ::= ${form.close} | ${form.char(name(i + 1))}`)
    else rules.push(`${name(i)} ::= ${form.close}`)
  }
  return {start: name(0), rules}
}
