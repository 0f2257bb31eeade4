// Random walks through a grammar: at every position one of the allowed tokens is drawn (seeded), as a
// model with random weights would, until the grammar ends or the budget runs out. What a walk produces
// is what the grammar alone guarantees.
import type {GrammarMatcherState} from '../../src/grammar/matcher.js'
import {allows} from '../../src/grammar/matcher.js'

export interface Walk {
  ids: number[]
  /** The grammar ended (a stop token was accepted; it is not in ids). */
  ended: boolean
}

export function seeded(seed: number): () => number {
  let s = seed >>> 0 || 1
  return () => {
    s ^= s << 13
    s ^= s >>> 17
    s ^= s << 5
    return (s >>> 0) / 0x100000000
  }
}

/** `stopBias`: chance of taking a stop token when one is allowed (keeps walks short). */
export async function walk(m: GrammarMatcherState, vocab: number, rnd: () => number, budget: number, stopBias = 0.5): Promise<Walk> {
  const ids: number[] = []
  for (let i = 0; i < budget; i++) {
    const mask = await m.nextMask()
    const allowed: number[] = []
    for (let id = 0; id < vocab; id++) if (allows(mask, id)) allowed.push(id)
    const stops = allowed.filter(id => m.stopTokenIds.includes(id))
    const pick = stops.length > 0 && rnd() < stopBias ? stops[0]! : allowed[Math.floor(rnd() * allowed.length)]!
    if (!m.accept(pick)) throw new Error(`the grammar refused token ${pick} from its own mask`)
    if (m.stopTokenIds.includes(pick)) return {ids, ended: true}
    ids.push(pick)
  }
  return {ids, ended: false}
}
