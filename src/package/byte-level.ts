// GPT-2's byte-level alphabet, which byte-level BPE vocabularies (Qwen's tokenizer.json) spell their tokens in:
// every byte is one printable character ("Ġ" for a space), so a token's bytes are its characters mapped back.

/** Character code → the byte it stands for, or -1 (the alphabet's characters are all below U+0144). */
export type ByteLevelAlphabet = Int16Array

/** The inverse of bytes_to_unicode, indexed by character code. */
export function byteLevelBytes(): ByteLevelAlphabet {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)
  const map = new Int16Array(512).fill(-1)
  let extra = 0
  for (let b = 0; b < 256; b++) map[printable(b) ? b : 256 + extra++] = b
  return map
}

/** A byte-level token's bytes (characters outside the alphabet are skipped). */
export function byteLevelTokenBytes(token: string, alphabet: ByteLevelAlphabet): Uint8Array {
  const out = new Uint8Array(token.length)
  return out.subarray(0, byteLevelInto(token, alphabet, out))
}

/** Writes a byte-level token's bytes into `out` (at least token.length long); returns how many. */
export function byteLevelInto(token: string, alphabet: ByteLevelAlphabet, out: Uint8Array): number {
  let n = 0
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i)
    const b = c < alphabet.length ? alphabet[c]! : -1
    if (b >= 0) out[n++] = b
  }
  return n
}
