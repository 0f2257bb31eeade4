// The UTF-8 guard against a fatal TextDecoder (and no U+2028 / U+2029): over random sequences of one-, two- and three-byte tokens, a token is
// refused exactly when it would make the bytes so far no prefix of valid UTF-8, the state is "between characters"
// exactly when they are complete, masks clear exactly the refused tokens, and a token without bytes (a stop or
// added token) is taken only between characters.
import t from 'tap'
import {Utf8Guard, UTF8_STATES} from '../../src/grammar/utf8-guard.js'
import {seeded} from '../helpers/grammar-walk.js'

// valid UTF-8 so far, without U+2028 / U+2029 (which the guard leaves out)
const validPrefix = (bytes: Uint8Array): boolean => {
  try {
    return !/[\u2028\u2029]/.test(new TextDecoder('utf-8', {fatal: true}).decode(bytes, {stream: true}))
  } catch {
    return false
  }
}
const complete = (bytes: Uint8Array): boolean => {
  try {
    new TextDecoder('utf-8', {fatal: true}).decode(bytes)
    return true
  } catch {
    return false
  }
}

// every single byte, then byte pairs and triples that begin characters (lead + continuation ranges), then no bytes
const tokens: Uint8Array[] = []
for (let b = 0; b < 256; b++) tokens.push(Uint8Array.of(b))
for (const lead of [0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xc0]) for (const c of [0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf]) tokens.push(Uint8Array.of(lead, c))
for (const c of [0x80, 0x9f, 0xbf]) tokens.push(Uint8Array.of(0x61, 0xe2, c), Uint8Array.of(c, 0x62), Uint8Array.of(c, c, 0x63))
for (const c of [0xa7, 0xa8, 0xa9, 0xaa]) tokens.push(Uint8Array.of(0xe2, 0x80, c), Uint8Array.of(0xe2, 0x81, c), Uint8Array.of(0x80, c))
tokens.push(new TextEncoder().encode('é日😀'), new Uint8Array(0))
const empty = tokens.length - 1
const guard = Utf8Guard.fromBytes(tokens)

t.test('refusals and states follow the decoder', async t => {
  const rnd = seeded(3)
  let refused = 0
  let checked = 0
  for (let walk = 0; walk < 3000; walk++) {
    let bytes = new Uint8Array(0)
    let state = 0
    for (let i = 0; i < 6; i++) {
      // mostly continuation bytes and leads, where the automaton has something to decide
      const id = rnd() < 0.5 ? 0x80 + Math.floor(rnd() * 0x80) : Math.floor(rnd() * tokens.length)
      const joined = new Uint8Array(bytes.length + tokens[id]!.length)
      joined.set(bytes)
      joined.set(tokens[id]!, bytes.length)
      const next = guard.next(state, id)
      const ok = id === empty ? state === 0 : validPrefix(joined)
      checked++
      if (ok !== next >= 0) t.fail(`token ${id} [${[...tokens[id]!].map(b => b.toString(16))}] after [${[...bytes].map(b => b.toString(16))}]: guard ${next}, decoder ${ok}`)
      if (!ok) {
        refused++
        continue
      }
      bytes = joined
      state = next
      if ((state === 0) !== complete(bytes)) t.fail(`state ${state} after [${[...bytes].map(b => b.toString(16))}]`)
    }
  }
  t.ok(refused > 1000 && refused < checked - 1000, `both outcomes seen (${refused} refused of ${checked})`)
})

t.test('a mask keeps exactly the tokens the guard takes', async t => {
  for (let state = 0; state < UTF8_STATES; state++) {
    const words = Math.ceil(tokens.length / 32)
    const mask = guard.restrict(new Int32Array(words).fill(-1), state)
    for (let id = 0; id < tokens.length; id++) {
      const kept = (mask[id >> 5]! & (1 << (id & 31))) !== 0
      if (kept !== guard.next(state, id) >= 0) t.fail(`state ${state}, token ${id}`)
    }
    // bits another mask had cleared stay cleared
    const half = guard.restrict(new Int32Array(words).fill(0x55555555), state)
    for (let id = 1; id < tokens.length; id += 2) if ((half[id >> 5]! & (1 << (id & 31))) !== 0) t.fail(`state ${state}: token ${id} came back`)
  }
  t.equal(guard.next(0, empty), 0)
  for (let state = 1; state < UTF8_STATES; state++) t.equal(guard.next(state, empty), -1, `no bytes inside a character (state ${state})`)
  t.equal(guard.next(0, tokens.length), -1, 'ids past the table are refused')
})
