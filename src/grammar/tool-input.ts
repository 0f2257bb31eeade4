// The grammar of a freeform tool's input (OpenAI custom tools: `format: {type: "grammar", syntax: "lark" |
// "regex", definition}`) as XGrammar EBNF in the two spellings a tool call can carry it in: the text
// itself, and the text inside a JSON string. What cannot be enforced is a 400 naming the construct.
import {errors} from '../errors.js'
import {larkGrammar} from './text/lark.js'
import {regexNode} from './text/regex.js'
import {GrammarRefusal, toEbnf, type TextGrammar} from './text/text-grammar.js'

export interface ToolInputSource {
  syntax: 'lark' | 'regex'
  definition: string
  /** The request field it came from, e.g. "tools[2].format". */
  param: string
}

export interface ToolInputEbnf {
  /** The input text as it is. */
  raw: string
  /** The input text inside a JSON string (escaped as JSON escapes it). */
  json: string
}

export function toolInputEbnf(tool: string, source: ToolInputSource): ToolInputEbnf {
  try {
    const g: TextGrammar = source.syntax === 'lark' ? larkGrammar(source.definition) : {rules: new Map([['re', regexNode(source.definition)]]), root: 're'}
    return {raw: toEbnf(g, 'raw'), json: toEbnf(g, 'json')}
  } catch (e) {
    if (!(e instanceof GrammarRefusal)) throw e
    throw errors.invalidRequest(`Tool "${tool}": its ${source.syntax} grammar uses ${e.construct}, which cannot be enforced`, source.param, 'unsupported_grammar')
  }
}
