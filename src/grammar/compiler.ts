// Compiles what a request constrains its output to (a JSON Schema, any JSON object, or a structural tag
// such as a family's tool-call form) into XGrammar grammars for one model's vocabulary, and makes a
// matcher per sequence. The tokenizer info is built on first use; compiled grammars are kept in an LRU
// keyed by their source text, so a client that repeats its schema pays the compile once.
import {readFile} from 'node:fs/promises'
import type {CompiledGrammar, GrammarCompiler, StructuralTagFormat} from '@mlc-ai/web-xgrammar'
import {errors} from '../errors.js'
import {Lru} from '../cache/lru.js'
import {GrammarMatcherState} from './matcher.js'
import {jsonSchemaEbnf, SEPARATORS} from './json/json-ebnf.js'
import {enforceableSchema} from './schema-policy.js'
import {FREE_STRING_CHAR} from './json/string-length.js'
import {toolInputEbnf, type ToolInputEbnf, type ToolInputSource} from './tool-input.js'
import {Utf8Guard} from './utf8-guard.js'
import {closingVocab, type ClosingVocab} from './closing.js'
import {closingHints} from './closing-hints.js'
import {vocabStrings, type TokenizerJson} from './vocab.js'
import {isEngineFault, reloadXGrammar, xgrammar, type XGrammar} from './xgrammar.js'

export type {StructuralTagFormat, ToolInputEbnf, ToolInputSource}

/**
 * A tool as a tool-call grammar sees it: a JSON Schema for its arguments (true: any object), or, for a
 * freeform tool, the grammar of its one string argument `input`.
 */
export type ToolGrammarTool = {name: string; schema: Record<string, unknown> | boolean; input?: undefined} | {name: string; input: ToolInputEbnf}

/** What a request's output must follow. */
export type GrammarSpec =
  | {type: 'json_schema'; schema: unknown; param: string}
  | {type: 'json_object'}
  /** A structural tag whose JSON schemas were already checked (see checkSchema). */
  | {type: 'structural'; format: StructuralTagFormat}

export interface GrammarSource {
  /** tokenizer.json of the package. */
  tokenizerPath: string
  /** Logits row length (the model's vocab_size). */
  vocabSize: number
  /** Ids that end generation; the grammar allows them only once its output is complete. */
  stopTokenIds: readonly number[]
}

/** A compiled grammar and the XGrammar instance that made it (matchers must come from the same one). */
interface Compiled {
  xg: XGrammar
  grammar: CompiledGrammar
}

export class Grammars {
  private compiler: Promise<{xg: XGrammar; compiler: GrammarCompiler; guard: Utf8Guard; closer: ClosingVocab}> | undefined
  /** Built once per vocabulary (a reload keeps them). */
  private guard: Utf8Guard | undefined
  private closer: ClosingVocab | undefined
  private readonly cache = new Lru<string, Promise<Compiled>>(64, p => void p.then(c => c.grammar.dispose(), () => {}))

  constructor(private readonly source: GrammarSource) {}

  /** Checks a JSON Schema for keywords that cannot be enforced (400 naming the first) and returns the form to compile. */
  checkSchema(schema: unknown, param: string): Record<string, unknown> | boolean {
    return enforceableSchema(schema, param)
  }

  /** A freeform tool's input grammar as EBNF (a 400 naming what cannot be enforced). */
  checkToolInput(tool: string, source: ToolInputSource): ToolInputEbnf {
    return toolInputEbnf(tool, source)
  }

  /** A matcher for one sequence following `spec`. Throws a 400 SplashError when the spec cannot be enforced. */
  async matcher(spec: GrammarSpec): Promise<GrammarMatcherState> {
    const {xg, grammar} = await this.compile(spec)
    const {guard, closer} = await this.getCompiler()
    const m = await xg.GrammarMatcher.createGrammarMatcher(grammar, [...this.source.stopTokenIds], false)
    // a structural tag's own shape guides the closing walk out of its free parts (closing-hints.ts)
    return new GrammarMatcherState(m, this.source.stopTokenIds, guard, closer, spec.type === 'structural' ? closingHints(spec.format) : undefined)
  }

  private compile(spec: GrammarSpec): Promise<Compiled> {
    const key =
      spec.type === 'json_schema'
        ? `s:${JSON.stringify(this.checkSchema(spec.schema, spec.param))}`
        : spec.type === 'json_object'
          ? 'o'
          : `t:${JSON.stringify(spec.format)}`
    const hit = this.cache.get(key)
    if (hit) return hit
    const job = this.build(spec, key)
    this.cache.set(key, job)
    // a failure stays cached too (same input, same 400; also past the reload a fault makes); callers see it through
    // their own await
    job.catch(() => void (this.cache.get(key) ?? this.cache.set(key, job)))
    return job
  }

  private async build(spec: GrammarSpec, key: string): Promise<Compiled> {
    const {xg, compiler} = await this.getCompiler()
    try {
      const format: StructuralTagFormat =
        spec.type === 'json_object'
          ? {type: 'grammar', grammar: await jsonSchemaEbnf({type: 'object'})}
          : spec.type === 'json_schema'
            ? {type: 'grammar', grammar: await jsonSchemaEbnf(JSON.parse(key.slice(2)) as Record<string, unknown> | boolean)}
            : await compactJson(spec.format)
      // every grammar goes through the structural-tag compiler, EBNF included: compileGrammar(ebnf) lowers a
      // bounded repetition above 128 twice (a repetition of lookahead rules), which made each mask inside a
      // `maxLength: 300` string cost 150–390 ms instead of 0.2–0.3 ms (docs/structured-output.md)
      const grammar = await compiler.compileStructuralTag({type: 'structural_tag', format})
      return {xg, grammar}
    } catch (e) {
      // a trap inside the wasm can leave the instance unable to compile again: later grammars get a fresh one
      // (grammars already compiled and live matchers stay with the old instance, as far as it still works)
      if (isEngineFault(e)) this.reload()
      const param = spec.type === 'json_schema' ? spec.param : undefined
      // an abort inside the wasm says only "Aborted(). Build with -sASSERTIONS...": nothing a client can act on
      const said = String((e as Error).message ?? e)
      const why = /Aborted\(|ASSERTIONS|RuntimeError/.test(said) || isEngineFault(e) ? 'it refused it without saying why; check the schema against the JSON Schema specification' : said.slice(0, 200)
      throw errors.invalidRequest(`The grammar engine could not compile this ${spec.type === 'structural' ? 'tool schema' : 'JSON Schema'} (${why})`, param, 'unsupported_schema')
    }
  }

  private getCompiler(): Promise<{xg: XGrammar; compiler: GrammarCompiler; guard: Utf8Guard; closer: ClosingVocab}> {
    this.compiler ??= (async () => {
      const xg = xgrammar()
      const json = JSON.parse(await readFile(this.source.tokenizerPath, 'utf8')) as TokenizerJson
      const vocab = vocabStrings(json, this.source.vocabSize)
      const info = await xg.TokenizerInfo.createTokenizerInfo(vocab, 'byte_level', false, this.source.vocabSize, [...this.source.stopTokenIds])
      this.guard ??= Utf8Guard.fromVocab(vocab, new Set((json.added_tokens ?? []).map(t => t.id)))
      this.closer ??= closingVocab(vocab)
      return {xg, compiler: await xg.GrammarCompiler.createGrammarCompiler(info, true), guard: this.guard, closer: this.closer}
    })()
    return this.compiler
  }

  /** A fresh XGrammar instance for the grammars compiled from now on (the cached ones belong to the old one). */
  private reload(): void {
    reloadXGrammar()
    this.compiler = undefined
    this.cache.clear()
  }
}

/**
 * A json_schema element flagged with this key (a family's tool-call form that reads values back up to markup) has
 * its free strings written without a raw `<` (it may still come as the escape \u003c): a JSON value inside an XML
 * tool call must not hold `</parameter>` or `<parameter=`, where the parser would cut it.
 */
export const MARKUP_FREE = 'splash_markup_free'

/** The grammar with the raw characters of its strings (XGrammar's free ones and string-length.ts's) but `<`. */
function withoutRawLessThan(ebnf: string): string {
  const sub = ebnf.split('\n').find(line => line.startsWith('basic_string_sub ::='))
  if (sub !== undefined && !sub.includes(FREE_STRING_CHAR)) throw new Error('the grammar engine wrote its free strings in an unexpected form')
  return ebnf.split(FREE_STRING_CHAR).join(`${FREE_STRING_CHAR.slice(0, -1)}<]`)
}

/**
 * Structural tags compile their json_schema elements with free whitespace (a random or confused model
 * can wander in it for ever); each is replaced by a grammar element with the same separators as
 * response formats.
 */
async function compactJson(format: StructuralTagFormat): Promise<StructuralTagFormat> {
  const visit = async (node: unknown): Promise<unknown> => {
    if (Array.isArray(node)) return Promise.all(node.map(visit))
    if (typeof node !== 'object' || node === null) return node
    const o = node as Record<string, unknown>
    if (o.type === 'json_schema' && 'json_schema' in o) {
      const grammar = await jsonSchemaEbnf(o.json_schema as Record<string, unknown> | boolean)
      return {type: 'grammar', grammar: o[MARKUP_FREE] === true ? withoutRawLessThan(grammar) : grammar}
    }
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(o)) out[k] = await visit(v)
    return out
  }
  return (await visit(format)) as StructuralTagFormat
}
