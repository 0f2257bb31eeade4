// A small byte-level BPE tokenizer in tokenizer.json form, shaped like Qwen's (NFC, split regex, ByteLevel,
// added tokens), so tests run offline. 256 byte tokens, a few merges (some that join bytes of one UTF-8
// character and some that stop half way through one), then the chat special tokens.

import {mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

export const SPECIAL_TOKENS = [
  '<|endoftext|>',
  '<|im_start|>',
  '<|im_end|>',
  '<|vision_start|>',
  '<|vision_end|>',
  '<|image_pad|>',
  '<|video_pad|>',
  '<tool_call>',
  '</tool_call>',
  '<tool_response>',
  '</tool_response>',
  '<think>',
  '</think>',
]

const SPLIT_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/** GPT-2's byte ↔ printable-character table. */
export function bytesToUnicode(): string[] {
  const keep: number[] = []
  for (let b = 33; b <= 126; b++) keep.push(b)
  for (let b = 161; b <= 172; b++) keep.push(b)
  for (let b = 174; b <= 255; b++) keep.push(b)
  const table: string[] = new Array(256)
  let extra = 0
  for (let b = 0; b < 256; b++) {
    table[b] = keep.includes(b) ? String.fromCharCode(b) : String.fromCharCode(256 + extra++)
  }
  return table
}

/** Merge sequences, written as text; each is merged left to right into one token. */
const MERGED_WORDS = [
  ' t', ' th', ' the', 'he', 'in', 'er', ' a', ' w', 'or', 'ou', ' c', 'on', 'is', ' is', 'it',
  '\n\n', ' =', 'name', 'function', 'parameter', 'tool', 'think', 'ing',
]
/** Byte sequences (hex) merged although they are not whole characters: 你 = e4 bd a0, 😀 = f0 9f 98 80. */
const MERGED_BYTES = ['e4bd', 'e4bda0', 'f09f', 'f09f98', 'c3a9', 'e5a5bd']

export function tinyTokenizerJson(): Record<string, unknown> {
  const b2u = bytesToUnicode()
  const vocab: Record<string, number> = {}
  for (let b = 0; b < 256; b++) vocab[b2u[b]!] = b
  const merges: [string, string][] = []
  const addSequence = (bytes: number[]) => {
    let left = b2u[bytes[0]!]!
    for (let i = 1; i < bytes.length; i++) {
      const right = b2u[bytes[i]!]!
      const merged = left + right
      if (vocab[merged] === undefined) {
        merges.push([left, right])
        vocab[merged] = Object.keys(vocab).length
      }
      left = merged
    }
  }
  for (const word of MERGED_WORDS) addSequence([...Buffer.from(word, 'utf8')])
  for (const hex of MERGED_BYTES) addSequence([...Buffer.from(hex, 'hex')])
  const base = Object.keys(vocab).length
  const added_tokens = SPECIAL_TOKENS.map((content, i) => ({
    id: base + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: !content.startsWith('<t') && !content.startsWith('</t'),
  }))
  const byteLevel = {type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false}
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens,
    normalizer: {type: 'NFC'},
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        {type: 'Split', pattern: {Regex: SPLIT_REGEX}, behavior: 'Isolated', invert: false},
        byteLevel,
      ],
    },
    post_processor: byteLevel,
    decoder: byteLevel,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges,
    },
  }
}

export const TINY_TOKENIZER_CONFIG = {
  add_bos_token: false,
  bos_token: null,
  eos_token: '<|im_end|>',
  pad_token: '<|endoftext|>',
  clean_up_tokenization_spaces: false,
  model_max_length: 32768,
  tokenizer_class: 'Qwen2Tokenizer',
}

/** Writes tokenizer.json and tokenizer_config.json into a fresh temp folder and returns its path. */
export function writeTinyTokenizer(): string {
  const dir = mkdtempSync(join(tmpdir(), 'splash-tok-'))
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tinyTokenizerJson()))
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(TINY_TOKENIZER_CONFIG))
  return dir
}
