// Every string over an alphabet up to a length, shortest first (for deciding a grammar string by string).
export function* strings(alphabet: string, max: number): Generator<string> {
  let level = ['']
  yield ''
  for (let l = 1; l <= max; l++) {
    level = level.flatMap(s => [...alphabet].map(c => s + c))
    yield* level
  }
}
