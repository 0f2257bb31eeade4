// What a string with length bounds costs in a response format (a report, not a test): for each maxLength, the
// compile of `{"s": <string>}` (one Grammars: each schema compiles once) and the mask at every position while the
// string is written up to its bound (median and largest), against the same object with a free string.
// `ascii` writes ASCII text only (for builds before session 22, whose bounded strings took no other characters).
//   npx tsx bench/grammar-bounds.ts [package-dir] [maxLength,…] [ascii]
import {join} from 'node:path'
import {readManifest} from '../src/package/manifest.ts'
import {Grammars} from '../src/grammar/compiler.ts'
import {QwenTokenizer} from '../models/qwen3_5/tokenizer.ts'

const dir = process.argv[2] ?? new URL('../packages/default/', import.meta.url).pathname
const bounds = (process.argv[3] ?? '20,64,128,300,1000').split(',').map(Number)
const manifest = await readManifest(dir)
const path = join(dir, manifest.tokenizer.file)
const tokenizer = await QwenTokenizer.load(path)
const source = {tokenizerPath: path, vocabSize: manifest.config.vocab_size, stopTokenIds: [...manifest.tokenizer.eos_token_ids]}
const words = process.argv[4] === 'ascii' ? 'the quick brown fox jumps over the lazy dog while a cafe serves creme brulee and tea; ' : 'the quick brown fox jumps over the lazy dog while a café serves crème brûlée and 日本語 tea; '

const grammars = new Grammars(source)
await grammars.matcher({type: 'json_object'}) // tokenizer info (and the UTF-8 guard), outside the timings

async function run(max: number | undefined): Promise<string> {
  const schema = {type: 'object', properties: {s: max === undefined ? {type: 'string'} : {type: 'string', maxLength: max}}, required: ['s']}
  const t0 = performance.now()
  const m = await grammars.matcher({type: 'json_schema', schema, param: 'response_format'})
  const compile = performance.now() - t0
  const content = words.repeat(Math.ceil((max ?? 200) / words.length) + 1).slice(0, max ?? 200)
  const times: number[] = []
  for (const id of tokenizer.encode(`{"s": "${content}`)) {
    const t = performance.now()
    await m.nextMask()
    times.push(performance.now() - t)
    if (!m.accept(id)) throw new Error(`the grammar refused token ${id}`)
  }
  m.dispose()
  const inside = times.slice(4).sort((a, b) => a - b)
  return `| ${max ?? 'free'} | ${compile.toFixed(0)} ms | ${inside[inside.length >> 1]!.toFixed(3)} ms | ${inside.at(-1)!.toFixed(3)} ms | ${inside.length} |`
}

console.log(`${manifest.name} (vocabulary ${source.vocabSize})\n\n| maxLength | compile | mask, median | mask, largest | positions |\n| --- | --- | --- | --- | --- |`)
for (const max of [undefined, ...bounds]) console.log(await run(max))
