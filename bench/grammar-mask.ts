// Grammar mask cost per token against the decode step (a report, not a test), on the real engine (draft off).
// For each schema:
// - where the time goes, replaying a sampled constrained generation through a fresh matcher: XGrammar's
//   mask fill (the wasm call alone), the fill plus its copy out of the wasm heap (what the matcher calls),
//   accepting a token, and the native masked sample against an unmasked one (the mask's conversion and use);
// - the cost that adds to the wall time of a step: constrained and unconstrained generations interleaved
//   (greedy, and sampled at T = 0.7, a seed per round), ms per token, median of the rounds; the median step as the
//   JS thread sees it plus the JS time after it (constrained less unconstrained: the critical path a token
//   adds, steadier under load than whole generations); the process's CPU time per token (all threads). Plain
//   rows compute a mask only when the grammar refuses the in-step token (GrammarRows.settle), and while
//   refusals go on (GrammarRows.prepare, during the step); the fraction of tokens that needed one is reported;
// - the same costs timed where the engine pays them in the constrained rounds, greedy and sampled (the masks it
//   waited for, the second draws of refused rows, the accepts), per token against the unconstrained step: steadier
//   than the wall figures on a shared machine, and without what a refusal does to the steps around it.
// The last two grammars are Codex's tools under tool_choice auto and a forced call of Codex's apply_patch tool (its Lark grammar, in the XML call form).
//   npx tsx bench/grammar-mask.ts [package-dir] [max-tokens] [rounds] [grammar-name-part]
import {join} from 'node:path'
import {NativeModel} from '../src/native/native-model.ts'
import {Engine} from '../src/engine/engine.ts'
import {GREEDY, samplingParams, type SamplingParams} from '../src/engine/sampling.ts'
import {native} from '../src/native/native.ts'
import type {TokenConstraint} from '../src/engine/request.ts'
import {readManifest} from '../src/package/manifest.ts'
import {Grammars, type GrammarSpec} from '../src/grammar/compiler.ts'
import {toolCallGrammar} from '../models/qwen3_5/tool-grammar.ts'
import type {GrammarMatcherState} from '../src/grammar/matcher.ts'
import {QwenTokenizer} from '../models/qwen3_5/tokenizer.ts'
import {CountedConstraint as Counted} from '../test/helpers/counted-constraint.ts'

const dir = process.argv[2] ?? new URL('../packages/default/', import.meta.url).pathname
const maxTokens = Number(process.argv[3] ?? 96)
const rounds = Number(process.argv[4] ?? 5)
const only = process.argv[5] // run only the grammars whose name contains this
const manifest = await readManifest(dir)
const tokenizer = await QwenTokenizer.load(join(dir, manifest.tokenizer.file))
const stop = [...manifest.tokenizer.eos_token_ids]
const vocab = manifest.config.vocab_size
const grammars = new Grammars({tokenizerPath: join(dir, manifest.tokenizer.file), vocabSize: vocab, stopTokenIds: stop})

// Codex's freeform apply_patch tool, forced, in the default package's XML tool-call form
const APPLY_PATCH = [
  'start: begin_patch hunk+ end_patch', 'begin_patch: "*** Begin Patch" LF', 'end_patch: "*** End Patch" LF?',
  'hunk: add_hunk | delete_hunk | update_hunk', 'add_hunk: "*** Add File: " filename LF add_line+', 'delete_hunk: "*** Delete File: " filename LF',
  'update_hunk: "*** Update File: " filename LF change_move? change?', 'filename: /(.+)/', 'add_line: "+" /(.*)/ LF -> line',
  'change_move: "*** Move to: " filename LF', 'change: (change_context | change_line)+ eof_line?', 'change_context: ("@@" | "@@ " /(.+)/) LF',
  'change_line: ("+" | "-" | " ") /(.*)/ LF', 'eof_line: "*** End of File" LF', '%import common.LF',
].join('\n')
const APPLY_PATCH_CALL = toolCallGrammar('xml', [{name: 'apply_patch', input: grammars.checkToolInput('apply_patch', {syntax: 'lark', definition: APPLY_PATCH, param: 'tools'})}], {type: 'calls', stopAfterFirst: true})
// what every Codex request carries: a free function tool and apply_patch, tool_choice auto (text free, calls held)
const CODEX_AUTO = toolCallGrammar('xml', [{name: 'shell', schema: true}, {name: 'apply_patch', input: grammars.checkToolInput('apply_patch', {syntax: 'lark', definition: APPLY_PATCH, param: 'tools'})}], {type: 'triggered'})
const SCHEMAS: Record<string, unknown> = {
  'person (free strings)': {type: 'object', properties: {name: {type: 'string'}, email: {type: 'string', format: 'email'}, age: {type: 'integer', minimum: 0, maximum: 150}, tags: {type: 'array', items: {type: 'string'}}}, required: ['name', 'age', 'tags']},
  'order (enums, bounded strings, nesting)': {type: 'object', properties: {id: {type: 'string', pattern: '^[A-Z]{3}-[0-9]{4}$'}, items: {type: 'array', items: {type: 'object', properties: {sku: {type: 'string', maxLength: 8}, qty: {type: 'integer', minimum: 1, maximum: 99}}, required: ['sku', 'qty']}, maxItems: 4}, status: {enum: ['new', 'paid', 'sent']}, note: {anyOf: [{type: 'string'}, {type: 'null'}]}}, required: ['id', 'items', 'status', 'note']},
  'any JSON object': undefined,
  'apply_patch call (Lark)': APPLY_PATCH_CALL,
  'Codex tools under auto (free text, triggered calls)': CODEX_AUTO,
}
// a seed per round: each round is another sampled generation (one seed alone is one sample of the refusal rate)
const sampled = (round: number) => samplingParams({temperature: 0.7, seed: 7 + round})

const prompt = Int32Array.from(tokenizer.encode('<|im_start|>user\nDescribe an example record as JSON.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n'))
process.env.SPLASH_DRAFT = 'off'
const model = await NativeModel.open(dir, 4096, {threads: 2})
const engine = new Engine(model)
// the second draws of refused rows, timed where the engine makes them (GrammarRows.choose → StepModel.resample)
const redraws = {n: 0, ms: 0}
const nativeResample = model.resample.bind(model)
model.resample = (...args) => {
  const t0 = performance.now()
  const r = nativeResample(...args)
  redraws.n++
  redraws.ms += performance.now() - t0
  return r
}
// Per step: from model.step() to its promise settling as the JS thread sees it (the native step, plus any
// mask computation that outlasts it), and from there to the next model.step() (the JS work on the critical
// path: postprocess, with its accept and masked sample).
const timeline = {step: [] as number[], between: [] as number[]}
let settledAt = 0
const nativeStep = model.step.bind(model)
model.step = items => {
  const t0 = performance.now()
  if (settledAt) timeline.between.push(t0 - settledAt)
  const p = nativeStep(items)
  void p.then(() => {
    settledAt = performance.now()
    timeline.step.push(settledAt - t0)
  })
  return p
}
interface EngineCosts {tokens: number; masks: number; maskMs: number; acceptMs: number; redraws: number; redrawMs: number}
const engineCosts = (): EngineCosts => ({tokens: 0, masks: 0, maskMs: 0, acceptMs: 0, redraws: 0, redrawMs: 0})
/** Runs one constrained generation, adding what the engine paid for `c` (and its second draws) to `into`. */
async function counted<R extends {tokens: number}>(into: EngineCosts, c: Counted, f: () => Promise<R>): Promise<R> {
  const before = {...redraws}
  const r = await f()
  into.tokens += r.tokens
  into.masks += c.masks
  into.maskMs += c.maskMs
  into.acceptMs += c.acceptMs
  into.redraws += redraws.n - before.n
  into.redrawMs += redraws.ms - before.ms
  return r
}

function timed<T>(f: () => Promise<T>): Promise<T & {step: number; between: number}> {
  timeline.step = []
  timeline.between = []
  settledAt = 0
  return f().then(r => ({...r, step: median(timeline.step), between: median(timeline.between)}))
}

/** ms per token from the first to the last token (unconstrained runs ignore EOS: as many tokens as allowed). */
async function run(sampling: SamplingParams, constraint?: TokenConstraint): Promise<{tokens: number; msPerToken: number; cpuPerToken: number}> {
  let tokens = 0
  let first = 0
  let last = 0
  let cpu0 = process.cpuUsage()
  let cpu = cpu0
  for await (const ev of engine.generate({prompt, maxTokens, sampling, stopTokenIds: constraint ? stop : [], constraint})) {
    if (ev.type !== 'token') continue
    tokens++
    last = performance.now()
    cpu = process.cpuUsage(cpu0)
    if (tokens === 1) (first = last), (cpu0 = process.cpuUsage())
  }
  const n = Math.max(1, tokens - 1)
  return {tokens, msPerToken: (last - first) / n, cpuPerToken: (cpu.user + cpu.system) / 1000 / n}
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length)
const best = (f: () => void, n = 5) => {
  let b = Infinity
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    f()
    b = Math.min(b, performance.now() - t0)
  }
  return b
}

/** Replays `tokens` through a fresh matcher, timing each position's fill, copy, accept and masked sample. */
async function breakdown(matcher: GrammarMatcherState, tokens: number[]) {
  const logits = Float32Array.from({length: vocab}, () => Math.random())
  const fill: number[] = []
  const fillCopy: number[] = []
  const accept: number[] = []
  const masked: number[] = []
  const plain: number[] = []
  const raw = (matcher as unknown as {matcher: {handle: {GetNextTokenBitmask(n: number): {delete(): void}}}}).matcher.handle
  for (const token of tokens) {
    // the first call at a position is the cost the engine pays (later ones find warm caches)
    const c0 = performance.now()
    raw.GetNextTokenBitmask(vocab).delete()
    fill.push(performance.now() - c0)
    const rawBest = best(() => raw.GetNextTokenBitmask(vocab).delete())
    let b = Infinity
    let mask: Int32Array | undefined
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now()
      mask = await (matcher as unknown as {matcher: {getNextTokenBitmask(): Promise<Int32Array>}}).matcher.getNextTokenBitmask()
      b = Math.min(b, performance.now() - t0)
    }
    fillCopy.push(b - rawBest)
    masked.push(best(() => native.sampleLogits(logits, vocab, {params: GREEDY, rows: [{allowed: mask}]})))
    plain.push(best(() => native.sampleLogits(logits, vocab, {params: GREEDY, rows: [{}]})))
    const t0 = performance.now()
    matcher.accept(token)
    accept.push(performance.now() - t0)
  }
  return {fill: mean(fill), copy: mean(fillCopy), accept: mean(accept), convert: mean(masked) - mean(plain), fillP99: [...fill].sort((a, b) => a - b)[Math.floor(0.99 * fill.length)] ?? 0}
}

await run(GREEDY) // warm up
console.log(`package ${manifest.name}, vocab ${vocab}, ${maxTokens} tokens max, draft off, 2 threads, ${rounds} interleaved rounds`)
for (const [name, schema] of Object.entries(SCHEMAS)) {
  if (only && !name.includes(only)) continue
  const spec: GrammarSpec =
    schema === undefined ? {type: 'json_object'} : schema === APPLY_PATCH_CALL || schema === CODEX_AUTO ? {type: 'structural', format: schema as typeof CODEX_AUTO} : {type: 'json_schema', schema, param: 'x'}
  const t0 = performance.now()
  ;(await grammars.matcher(spec)).dispose()
  const compileMs = performance.now() - t0
  const wall = {plainGreedy: [] as number[], greedy: [] as number[], plainSampled: [] as number[], sampled: [] as number[]}
  const split = {plainGreedy: [] as Array<[number, number]>, greedy: [] as Array<[number, number]>, plainSampled: [] as Array<[number, number]>, sampled: [] as Array<[number, number]>}
  const cpu = {plainGreedy: [] as number[], greedy: [] as number[], plainSampled: [] as number[], sampled: [] as number[]}
  const keep = <R extends {msPerToken: number; cpuPerToken: number; step: number; between: number}>(k: keyof typeof wall, r: R): R => {
    wall[k].push(r.msPerToken)
    cpu[k].push(r.cpuPerToken)
    split[k].push([r.step, r.between])
    return r
  }
  let lazy = {masks: 0, tokens: 0}
  let lazySampled = {masks: 0, tokens: 0}
  // in the engine, summed over the constrained rounds: mask fills waited for, accepts, second draws
  const inEngine = {greedy: engineCosts(), sampled: engineCosts()}
  let sampledTokens: number[] = []
  for (let r = 0; r < rounds; r++) {
    keep('plainGreedy', await timed(() => run(GREEDY)))
    const g = new Counted(await grammars.matcher(spec))
    const out = keep('greedy', await counted(inEngine.greedy, g, () => timed(() => run(GREEDY, g))))
    lazy = {masks: g.masks, tokens: out.tokens}
    keep('plainSampled', await timed(() => run(sampled(r))))
    const s = new Counted(await grammars.matcher(spec))
    const sampledOut = keep('sampled', await counted(inEngine.sampled, s, () => timed(() => run(sampled(r), s))))
    lazySampled = {masks: s.masks, tokens: sampledOut.tokens}
    sampledTokens = s.tokens
  }
  const parts = await breakdown(await grammars.matcher(spec), sampledTokens)
  const step = median(wall.plainGreedy)
  const pct = (ms: number) => `${((100 * ms) / step).toFixed(1)}%`
  const added = (c: keyof typeof wall, u: keyof typeof wall) => {
    const part = (k: keyof typeof wall, j: number) => median(split[k].map(x => x[j]!))
    // the median step and the JS time after it, constrained less unconstrained: the wall time a token adds on the
    // JS thread's critical path, steadier under load than whole-generation wall times
    const path = part(c, 0) + part(c, 1) - part(u, 0) - part(u, 1)
    return (
      `${(median(wall[c]) - median(wall[u])).toFixed(3)} ms (${(100 * (median(wall[c]) / median(wall[u]) - 1)).toFixed(1)}%; median of the rounds' own ratios ${(100 * (median(wall[c].map((x, r) => x / wall[u][r]!)) - 1)).toFixed(1)}%); step as seen from JS ${part(c, 0).toFixed(3)} vs ${part(u, 0).toFixed(3)} ms, JS between steps ${part(c, 1).toFixed(3)} vs ${part(u, 1).toFixed(3)} ms ` +
      `→ ${path.toFixed(3)} ms per step (${((100 * path) / (part(u, 0) + part(u, 1))).toFixed(1)}%); CPU (all threads) ${median(cpu[c]).toFixed(2)} vs ${median(cpu[u]).toFixed(2)} ms/token (${(100 * (median(cpu[c]) / median(cpu[u]) - 1)).toFixed(1)}%)`
    )
  }
  const perMask = parts.fill + parts.copy + parts.accept + parts.convert
  const per = (ms: number, n: number) => (ms / Math.max(1, n)).toFixed(3)
  const inEngineLine = (label: string, e: EngineCosts) => {
    const ms = e.maskMs + e.redrawMs + e.acceptMs
    return (
      `  ${label}, timed in the engine over the ${rounds} rounds (${e.tokens} tokens): ${e.masks} masks waited for ${per(e.maskMs, e.masks)} ms each, ` +
      `${e.redraws} second draws ${per(e.redrawMs, e.redraws)} ms each, accepts ${per(e.acceptMs, e.tokens)} ms a token → ${per(ms, e.tokens)} ms a token ` +
      `= ${pct(ms / Math.max(1, e.tokens))} of the unconstrained step (masks alone ${pct(e.maskMs / Math.max(1, e.tokens))})`
    )
  }
  console.log(
    `${name}: compile ${compileMs.toFixed(0)} ms\n` +
      `  per mask (replay of ${sampledTokens.length} sampled tokens): fill ${parts.fill.toFixed(3)} ms (p99 ${parts.fillP99.toFixed(3)}), copy out of wasm ${parts.copy.toFixed(3)} ms, ` +
      `accept ${parts.accept.toFixed(3)} ms, native conversion + masked sample ${parts.convert.toFixed(3)} ms → ${perMask.toFixed(3)} ms = ${pct(perMask)} of the ${step.toFixed(2)} ms step\n` +
      `  greedy: masks for ${lazy.masks} of ${lazy.tokens} tokens; ${median(wall.greedy).toFixed(2)} vs ${median(wall.plainGreedy).toFixed(2)} ms/token unconstrained: adds ${added('greedy', 'plainGreedy')}\n` +
      `  sampled T=0.7: masks for ${lazySampled.masks} of ${lazySampled.tokens} tokens; ${median(wall.sampled).toFixed(2)} vs ${median(wall.plainSampled).toFixed(2)} ms/token: adds ${added('sampled', 'plainSampled')}\n` +
      `${inEngineLine('greedy', inEngine.greedy)}\n${inEngineLine('sampled', inEngine.sampled)}`,
  )
}
model.close()
