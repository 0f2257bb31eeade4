// The text side of the Qwen family (qwen3_5, qwen3_5_moe, qwen3_next, qwen3): which tool-call form the
// package's template teaches, the stop tokens, reasoning efforts and budgets, and loading the package's
// tokenizer and template. Sibling family folders import this module.

import {join} from 'node:path'
import {errors} from '../../src/errors.js'
import type {Family, Manifest} from '../../src/package/manifest.js'
import {OutputParser, type OutputParserOptions, type ToolCallFormat} from './output.js'
import {PromptTokenizer, type PromptTokensOptions} from './prompt-tokens.js'
import {promptOpensThinking} from './reasoning.js'
import {ChatTemplate} from './template.js'
import {TokenOutputStream} from './token-stream.js'
import {QwenTokenizer} from './tokenizer.js'

export type TextManifest = Pick<Manifest, 'family' | 'tokenizer' | 'reasoning'>

/** How a request's reasoning_effort maps onto the template and the engine. */
export interface ThinkingPlan {
  /** The template's enable_thinking (false for "none"; undefined leaves the template's default). */
  enableThinking: boolean | undefined
  /** Thinking budget in tokens; undefined = unbounded. When spent, the engine closes the think block. */
  budget: number | undefined
  /** The effort in force (the package default when the request named none). */
  effort: string | undefined
}

export interface TextFamily {
  family: Family
  toolFormat: ToolCallFormat
  /** Generation ends on any of these ids (from the manifest). */
  stopTokenIds: number[]
  /** Efforts the package declares, in the manifest's order. */
  efforts: string[]
  thinking(effort?: string): ThinkingPlan
}

/** The tool-call form a template teaches: XML (`<function=…>`) when it mentions it, else JSON. */
export function detectToolFormat(templateSource: string, family: Family): ToolCallFormat {
  if (templateSource.includes('<function=')) return 'xml'
  if (templateSource.includes('<tool_call>')) return 'json'
  return family === 'qwen3_5' || family === 'qwen3_5_moe' ? 'xml' : 'json'
}

export function describeFamily(manifest: TextManifest, templateSource: string): TextFamily {
  const efforts = manifest.reasoning?.efforts ?? {}
  return {
    family: manifest.family,
    toolFormat: detectToolFormat(templateSource, manifest.family),
    stopTokenIds: [...manifest.tokenizer.eos_token_ids],
    efforts: Object.keys(efforts),
    thinking(effort?: string): ThinkingPlan {
      const chosen = effort ?? manifest.reasoning?.default
      if (chosen === undefined) return {enableThinking: undefined, budget: undefined, effort: undefined}
      if (chosen === 'none') return {enableThinking: false, budget: 0, effort: 'none'}
      const budget = efforts[chosen]
      if (budget === undefined) {
        const known = Object.keys(efforts).join(', ') || 'none'
        throw errors.invalidRequest(`reasoning_effort "${chosen}" is not offered by this model (it offers: ${known})`, 'reasoning_effort')
      }
      return {enableThinking: budget === 0 ? false : undefined, budget: budget === 0 ? 0 : budget, effort: chosen}
    },
  }
}

/** Everything a family needs to turn messages into ids and ids into events. */
export interface TextModule {
  family: TextFamily
  tokenizer: QwenTokenizer
  template: ChatTemplate
  prompts: PromptTokenizer
  /** Ids the engine appends to close the think block when a thinking budget is spent ("\n</think>\n\n"). */
  thinkCloseIds: number[]
  /** An output parser for a prompt rendered from this template (tool form and think state filled in). */
  outputParser(prompt: string, options: Omit<OutputParserOptions, 'toolFormat' | 'startInReasoning'>): OutputParser
  /** Generated ids → events for a prompt rendered from this template (detokenizer + parser + stop ids). */
  outputStream(prompt: string, options: Omit<OutputParserOptions, 'toolFormat' | 'startInReasoning'>): TokenOutputStream
  close(): Promise<void>
}

/** Loads the package's tokenizer and template (paths from the manifest, relative to the package folder). */
export async function loadTextModule(dir: string, manifest: TextManifest, options: PromptTokensOptions = {}): Promise<TextModule> {
  const [tokenizer, template] = await Promise.all([
    QwenTokenizer.load(join(dir, manifest.tokenizer.file)),
    ChatTemplate.load(join(dir, manifest.tokenizer.chat_template)),
  ])
  const family = describeFamily(manifest, template.source)
  const prompts = new PromptTokenizer(tokenizer, options)
  const outputParser = (prompt: string, parserOptions: Omit<OutputParserOptions, 'toolFormat' | 'startInReasoning'>) =>
    new OutputParser({...parserOptions, toolFormat: family.toolFormat, startInReasoning: promptOpensThinking(prompt)})
  return {
    family,
    tokenizer,
    template,
    prompts,
    thinkCloseIds: tokenizer.encode('\n</think>\n\n'),
    outputParser,
    outputStream: (prompt, parserOptions) =>
      new TokenOutputStream(tokenizer.detokenizer(), outputParser(prompt, parserOptions), family.stopTokenIds),
    close: () => prompts.close(),
  }
}
