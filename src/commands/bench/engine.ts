import {Flags} from '@oclif/core'
import {writeFile} from 'node:fs/promises'
import {BaseCommand} from '../../cli/base-command.js'
import {PRESETS} from '../../package/presets.js'
import {machine, presetPackage, splashVersion} from '../../bench/common.js'
import {engineBench, engineTable, type EngineBenchResult} from '../../bench/engine.js'

export default class BenchEngine extends BaseCommand {
  static override summary = 'Time the native engine directly: decode and prefill tokens/s, % of memory bandwidth, % of peak FLOP/s'
  static override examples = [
    '<%= config.bin %> bench engine --preset tiny-hybrid',
    '<%= config.bin %> bench engine --preset qwen3.5-0.8b --preset qwen3.8-27b --layers 4',
    '<%= config.bin %> bench engine --model ./my-package --threads 2',
  ]

  static override flags = {
    preset: Flags.string({summary: 'Synthetic q4 package shape (repeatable)', options: Object.keys(PRESETS), multiple: true}),
    layers: Flags.integer({summary: 'Keep only the first N layers of the big presets (hidden ≥ 2048: 27B, 35B-A3B, 4B), so files stay small', min: 1}),
    model: Flags.string({char: 'm', summary: 'A package folder to time (repeatable)', multiple: true}),
    threads: Flags.integer({summary: 'Compute threads (default: all cores)', min: 1}),
    'prefill-tokens': Flags.integer({summary: 'Tokens of the timed prefill step', default: 256, min: 8, max: 4096}),
    steps: Flags.integer({summary: 'Timed decode steps', default: 16, min: 2, max: 1000}),
    runs: Flags.integer({summary: 'Prefill repeats', default: 3, min: 1, max: 50}),
    json: Flags.string({summary: 'Also write every raw figure to this JSON file'}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(BenchEngine)
    const dirs: string[] = [...(flags.model ?? [])]
    for (const p of flags.preset ?? []) {
      const {num_hidden_layers: L, hidden_size: H} = PRESETS[p].config
      dirs.push(await presetPackage(p, flags.layers && flags.layers < L && H >= 2048 ? flags.layers : undefined))
    }
    if (dirs.length === 0) dirs.push(await presetPackage('tiny-hybrid', undefined))
    const results: EngineBenchResult[] = []
    for (const dir of dirs) {
      results.push(await engineBench({dir, threads: flags.threads, prefillTokens: flags['prefill-tokens'], decodeSteps: flags.steps, runs: flags.runs}))
    }
    const m = machine()
    this.log(`Splash engine benchmark — ${m.cpu}, ${m.cores} cores, ${(m.memoryBytes / 2 ** 30).toFixed(0)} GiB, ${results[0]?.isa ?? ''}\n`)
    this.log(engineTable(results))
    this.log(`\nPeak: ${results[0]?.peak.what}. Decode bandwidth counts weight bytes read per token (routed experts at top-k/experts).`)
    if (flags.json) {
      await writeFile(flags.json, JSON.stringify({kind: 'splash-engine-bench', version: splashVersion(), date: new Date().toISOString(), machine: m, results}, null, 2))
      this.log(`wrote ${flags.json}`)
    }
  }
}
