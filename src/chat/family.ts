// What a model family module (models/<family>/) hands the core once a package is loaded: its text
// codec, stop tokens, chat rendering and output parsing. The API plugins use it through the ModelHost;
// they never touch a tokenizer or template directly.
import type {ChatFamily} from './chat.js'

export interface StreamDecoder {
  /** Adds one token; returns the text that is now complete (never half a UTF-8 character). */
  push(token: number): string
  /** Whatever is still held back (an incomplete character at the very end). */
  flush(): string
}

export interface TextCodec {
  encode(text: string): number[]
  decode(tokens: readonly number[]): string
  streamDecoder(): StreamDecoder
  /** How one token reads on its own, for logprobs (partial UTF-8 shown as bytes:\\xNN). */
  tokenText(token: number): string
}

export interface ModelFamily {
  /** Family name as in the manifest (qwen3_5, qwen3_5_moe, qwen3_next, qwen3). */
  name: string
  codec: TextCodec
  /** End-of-turn / end-of-text ids: generation stops on them. */
  stopTokenIds: number[]
  chat: ChatFamily
  close(): Promise<void>
}

