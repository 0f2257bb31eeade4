// A real vocabulary's grammars for deciding texts: whether a compiled grammar takes a whole text and may then stop.
import {join} from 'node:path'
import {Grammars, type GrammarSpec} from '../../src/grammar/compiler.js'
import {readManifest} from '../../src/package/manifest.js'
import {QwenTokenizer} from '../../models/qwen3_5/tokenizer.js'

export interface Decider {
  grammars: Grammars
  tokenizer: QwenTokenizer
  /** Logits row length (the model's vocab_size). */
  size: number
  /** True when the grammar accepts every token of `text` (and, with `end`, a stop token after them). */
  accepts(spec: GrammarSpec, text: string, end?: boolean): Promise<boolean>
  /** The same for a JSON Schema response format, which must also be able to stop there. */
  acceptsJson(schema: unknown, text: string): Promise<boolean>
}

/** Grammars for the package in `dir` (its tokenizer, vocabulary and stop tokens). */
export async function decider(dir: string): Promise<Decider> {
  const manifest = await readManifest(dir)
  const path = join(dir, manifest.tokenizer.file)
  const stop = [...manifest.tokenizer.eos_token_ids]
  const tokenizer = await QwenTokenizer.load(path)
  const grammars = new Grammars({tokenizerPath: path, vocabSize: manifest.config.vocab_size, stopTokenIds: stop})
  const accepts = async (spec: GrammarSpec, text: string, end = true): Promise<boolean> => {
    const m = await grammars.matcher(spec)
    try {
      for (const id of tokenizer.encode(text)) if (!m.accept(id)) return false
      return end ? m.accept(stop[0]!) : true
    } finally {
      m.dispose()
    }
  }
  return {grammars, tokenizer, size: manifest.config.vocab_size, accepts, acceptsJson: (schema, text) => accepts({type: 'json_schema', schema, param: 'response_format'}, text)}
}
