// Streaming detokenization for byte-level BPE tokenizers (GPT-2 / Qwen style tokenizer.json).
// Each token maps to bytes through the vocabulary and the byte-level alphabet; text is emitted only as
// complete UTF-8, so a character split across tokens is never cut. Added tokens (specials, <think>, …)
// come out as their content. Concatenating every push and the final flush equals the tokenizer's full
// decode (skip_special_tokens false, no clean-up), including U+FFFD for invalid bytes.
import {byteLevelBytes, byteLevelTokenBytes} from '../package/byte-level.js'

/** Per-id bytes (ordinary tokens) or text (added tokens) of one tokenizer; build once, share. */
export class TokenByteTable {
  private constructor(
    private readonly bytes: (Uint8Array | undefined)[],
    private readonly added: Map<number, string>,
  ) {}

  /** Builds the table from a parsed tokenizer.json; throws when its decoder is not byte-level. */
  static fromTokenizerJson(json: TokenizerJsonLike): TokenByteTable {
    if (!isByteLevel(json.decoder)) throw new Error('incremental detokenizer: tokenizer.json decoder is not ByteLevel')
    const alphabet = byteLevelBytes()
    const bytes: (Uint8Array | undefined)[] = []
    for (const [token, id] of Object.entries(json.model.vocab)) bytes[id] = byteLevelTokenBytes(token, alphabet)
    const added = new Map<number, string>()
    for (const token of json.added_tokens ?? []) added.set(token.id, token.content)
    return new TokenByteTable(bytes, added)
  }

  /** The token's content when it is an added token, else undefined. */
  addedText(id: number): string | undefined {
    return this.added.get(id)
  }

  tokenBytes(id: number): Uint8Array | undefined {
    return this.bytes[id]
  }
}

export interface TokenizerJsonLike {
  model: {vocab: Record<string, number>}
  added_tokens?: {id: number; content: string}[]
  decoder?: unknown
}

export interface DetokenizerOptions {
  /** Ids that produce no text (e.g. stop tokens the caller does not want echoed). */
  skipIds?: Iterable<number>
}

export class IncrementalDetokenizer {
  private decoder = new TextDecoder('utf-8', {fatal: false, ignoreBOM: true})
  private readonly skip: Set<number>

  constructor(
    private readonly table: TokenByteTable,
    options: DetokenizerOptions = {},
  ) {
    this.skip = new Set(options.skipIds ?? [])
  }

  /** Feeds one token; returns the text it completed (may be empty while a character is incomplete). */
  push(id: number): string {
    if (this.skip.has(id)) return ''
    const added = this.table.addedText(id)
    if (added !== undefined) return this.flush() + added
    const bytes = this.table.tokenBytes(id)
    if (bytes === undefined || bytes.length === 0) return ''
    return this.decoder.decode(bytes, {stream: true})
  }

  pushAll(ids: Iterable<number>): string {
    let text = ''
    for (const id of ids) text += this.push(id)
    return text
  }

  /** Ends the stream: bytes of an unfinished character become U+FFFD, as in the full decode. */
  flush(): string {
    return this.decoder.decode()
  }
}

function isByteLevel(decoder: unknown): boolean {
  if (decoder === null || typeof decoder !== 'object') return false
  const d = decoder as {type?: string; decoders?: unknown[]}
  if (d.type === 'ByteLevel') return true
  return d.type === 'Sequence' && Array.isArray(d.decoders) && d.decoders.some(isByteLevel)
}
