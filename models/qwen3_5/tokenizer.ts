// The package's tokenizer: tokenizer.json (+ tokenizer_config.json) through @huggingface/tokenizers,
// whose ids equal HF's Rust tokenizer. Qwen has no BOS, so nothing is ever added around the text.

import {readFile} from 'node:fs/promises'
import {dirname, join} from 'node:path'
import {Tokenizer} from '@huggingface/tokenizers'
import {SplashError} from '../../src/errors.js'
import {IncrementalDetokenizer, TokenByteTable, type DetokenizerOptions, type TokenizerJsonLike} from '../../src/chat/incremental-detokenizer.js'

export interface AddedTokenInfo {
  id: number
  content: string
  special: boolean
  lstrip: boolean
  rstrip: boolean
}

/** Where a tokenizer came from, so a worker thread can load the same one. */
export interface TokenizerSource {
  tokenizerPath: string
  configPath?: string
}

/** The family's named special tokens (contents as in Qwen's tokenizer.json). */
export const SPECIAL = {
  endOfText: '<|endoftext|>',
  imStart: '<|im_start|>',
  imEnd: '<|im_end|>',
  visionStart: '<|vision_start|>',
  visionEnd: '<|vision_end|>',
  imagePad: '<|image_pad|>',
  videoPad: '<|video_pad|>',
  toolCall: '<tool_call>',
  toolCallEnd: '</tool_call>',
  toolResponse: '<tool_response>',
  toolResponseEnd: '</tool_response>',
  think: '<think>',
  thinkEnd: '</think>',
} as const

export type SpecialName = keyof typeof SPECIAL

function badTokenizer(path: string, why: string): SplashError {
  return new SplashError('invalid_tokenizer', 'invalid_request', `${path}: ${why}`)
}

function parseJson(text: string, path: string): unknown {
  try {
    return JSON.parse(text)
  } catch (e) {
    throw badTokenizer(path, `not valid JSON (${(e as Error).message}); expected a Hugging Face tokenizer file`)
  }
}

export class QwenTokenizer {
  readonly source: TokenizerSource | undefined
  private readonly tokenizer: Tokenizer
  private readonly added = new Map<string, AddedTokenInfo>()
  private table: TokenByteTable | undefined

  constructor(
    private readonly json: TokenizerJsonLike & {added_tokens?: AddedTokenInfo[]},
    config: Record<string, unknown> = {},
    source?: TokenizerSource,
  ) {
    this.tokenizer = new Tokenizer(json, config)
    for (const token of json.added_tokens ?? []) this.added.set(token.content, token)
    this.source = source
  }

  /** Loads `tokenizerPath` and, when present, tokenizer_config.json beside it (or `configPath`). */
  static async load(tokenizerPath: string, configPath = join(dirname(tokenizerPath), 'tokenizer_config.json')): Promise<QwenTokenizer> {
    const json = parseJson(await readFile(tokenizerPath, 'utf8'), tokenizerPath) as QwenTokenizer['json']
    const model = (json as {model?: {type?: unknown; vocab?: unknown; merges?: unknown}}).model
    if (model?.type !== 'BPE' || typeof model.vocab !== 'object' || model.vocab === null || Array.isArray(model.vocab) || !Array.isArray(model.merges)) {
      const found = model === undefined ? 'no "model"' : `model.type ${JSON.stringify(model.type)}, ${Array.isArray(model.merges) ? 'merges' : 'no merges list'}`
      throw badTokenizer(tokenizerPath, `expected a byte-level BPE tokenizer (model.type "BPE" with a model.vocab object and a model.merges list), found ${found}`)
    }
    let config: Record<string, unknown> = {}
    let foundConfig: string | undefined
    try {
      config = parseJson(await readFile(configPath, 'utf8'), configPath) as Record<string, unknown>
      foundConfig = configPath
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e
    }
    try {
      return new QwenTokenizer(json, config, {tokenizerPath, configPath: foundConfig})
    } catch (e) {
      throw badTokenizer(tokenizerPath, `the tokenizer library could not build it (${(e as Error).message}); expected a Hugging Face tokenizer.json with a byte-level BPE model`)
    }
  }

  encode(text: string): number[] {
    return this.tokenizer.encode(text, {add_special_tokens: false}).ids
  }

  /** The text of `ids`; `skipSpecialTokens` drops tokens marked special (not <think> or <tool_call> in Qwen). */
  decode(ids: readonly number[], options: {skipSpecialTokens?: boolean} = {}): string {
    if (ids.length === 0) return ''
    return this.tokenizer.decode([...ids], {skip_special_tokens: options.skipSpecialTokens ?? false, clean_up_tokenization_spaces: false})
  }

  /** The id of an added token by its content (e.g. "<|im_end|>", "</think>"), or undefined. */
  tokenId(content: string): number | undefined {
    return this.added.get(content)?.id
  }

  /** Ids of the named special tokens this tokenizer has (absent names are left out). */
  specialIds(): Partial<Record<SpecialName, number>> {
    const out: Partial<Record<SpecialName, number>> = {}
    for (const [name, content] of Object.entries(SPECIAL) as [SpecialName, string][]) {
      const id = this.tokenId(content)
      if (id !== undefined) out[name] = id
    }
    return out
  }

  /** The added token with this content, with its flags. */
  addedToken(content: string): AddedTokenInfo | undefined {
    return this.added.get(content)
  }

  /** Vocabulary size including added tokens. */
  get vocabSize(): number {
    return this.tokenizer.get_vocab(true).size
  }

  /** A streaming detokenizer; the byte table is built once per tokenizer. */
  detokenizer(options?: DetokenizerOptions): IncrementalDetokenizer {
    this.table ??= TokenByteTable.fromTokenizerJson(this.json)
    return new IncrementalDetokenizer(this.table, options)
  }
}
