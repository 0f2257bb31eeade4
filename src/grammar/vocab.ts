// The vocabulary as XGrammar needs it: every token's string as tokenizer.json spells it (byte-level
// BPE: "Ġthe"), in id order, added tokens included, padded with "" up to the model's embedding rows.

export interface TokenizerJson {
  model?: {vocab?: Record<string, number> | Array<[string, number]>}
  added_tokens?: Array<{id: number; content: string}>
}

/** Token strings in id order; `size` is the logits row length (≥ the tokenizer's ids). */
export function vocabStrings(json: TokenizerJson, size: number): string[] {
  const out = new Array<string>(size).fill('')
  const vocab = json.model?.vocab
  if (!vocab || Array.isArray(vocab)) throw new Error('tokenizer.json has no BPE vocabulary (model.vocab)')
  for (const [token, id] of Object.entries(vocab)) if (id >= 0 && id < size) out[id] = token
  for (const added of json.added_tokens ?? []) if (added.id >= 0 && added.id < size) out[added.id] = added.content
  return out
}
