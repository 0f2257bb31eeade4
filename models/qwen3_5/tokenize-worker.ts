// Piscina task: tokenizes texts off the event loop. Each worker thread loads a tokenizer once per source.

import {QwenTokenizer, type TokenizerSource} from './tokenizer.js'

export interface TokenizeTask {
  source: TokenizerSource
  texts: string[]
}

const loaded = new Map<string, Promise<QwenTokenizer>>()

export default async function tokenize(task: TokenizeTask): Promise<Int32Array[]> {
  const key = `${task.source.tokenizerPath}\0${task.source.configPath ?? ''}`
  let tokenizer = loaded.get(key)
  if (!tokenizer) {
    tokenizer = QwenTokenizer.load(task.source.tokenizerPath, task.source.configPath)
    loaded.set(key, tokenizer)
  }
  const t = await tokenizer
  return task.texts.map(text => Int32Array.from(t.encode(text)))
}
