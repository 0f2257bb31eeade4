import {Flags} from '@oclif/core'
import {BaseCommand} from '../cli/base-command.js'
import {UsageError} from '../cli/errors.js'
import {PRESETS} from '../package/presets.js'
import {runBench} from '../bench/run.js'

export default class Bench extends BaseCommand {
  static override summary = 'Benchmark a package over HTTP: decode, 32K prefill, cached TTFT, aggregate decode at 1/2/4/8 clients'
  static override description =
    'Starts `splash serve` on the package, runs the four scenarios as a client would (coding prompts, fixed output limit, reasoning on, greedy), prints a markdown table and writes a JSON file with every raw figure plus an SVG chart next to it. Progress goes to stderr.'
  static override examples = [
    '<%= config.bin %> bench',
    '<%= config.bin %> bench --quick --preset tiny-hybrid',
    '<%= config.bin %> bench --preset qwen3.5-0.8b --prefill-tokens 8K --peer llama.cpp --threads 2',
    '<%= config.bin %> bench engine --preset qwen3.8-27b --layers 4',
  ]

  static override flags = {
    model: Flags.string({char: 'm', summary: 'Package to serve (default: packages/default)'}),
    preset: Flags.string({summary: 'Synthesise a q4 package of this shape into the bench cache and use it', options: Object.keys(PRESETS), exclusive: ['model']}),
    layers: Flags.integer({summary: 'With --preset: keep only the first N layers', min: 1}),
    quick: Flags.boolean({summary: 'Small settings that finish in under a minute on a tiny package (2 runs, 8 output tokens, 256-token prefill)'}),
    runs: Flags.integer({summary: 'Runs per scenario (default 3; quick 2)', min: 1, max: 100}),
    'max-tokens': Flags.integer({summary: 'Output limit of each request (default 128; quick 8)', min: 2, max: 8192}),
    'prefill-tokens': Flags.string({summary: 'Long prompt length, e.g. 32K (default 32K, capped by the served context; quick 256)'}),
    concurrency: Flags.string({summary: 'Concurrent clients for aggregate decode, comma-separated', default: '1,2,4,8'}),
    'reasoning-effort': Flags.string({summary: 'reasoning_effort of every request (reasoning on by default)', default: 'medium'}),
    temperature: Flags.custom<number>({summary: 'Sampling temperature of the requests (default 0: greedy)', parse: async s => {
        const t = Number(s)
        if (!(t >= 0 && t <= 2)) throw new Error('--temperature must be a number from 0 to 2')
        return t
      }})(),
    'max-context': Flags.string({summary: 'Passed to splash serve --max-context'}),
    out: Flags.string({char: 'o', summary: 'JSON file to write (default: bench-results/bench-<package>-<time>.json); the SVG goes next to it'}),
    peer: Flags.string({summary: 'Also run the scenarios through this engine on the same weights', options: ['llama.cpp']}),
    gguf: Flags.string({summary: 'With --peer: the GGUF to load (default: export the package into the bench cache)'}),
    draft: Flags.string({summary: "Speculative decoding on or off (default: off for a synthetic --preset package, whose draft has random weights; on otherwise)", options: ['on', 'off']}),
    threads: Flags.integer({summary: 'With --peer: llama.cpp threads (default: all cores; 1 on a machine of 2 cores or fewer)', min: 1}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(Bench)
    const conc = flags.concurrency.split(',').map(x => Number(x.trim()))
    if (conc.some(x => !Number.isInteger(x) || x < 1 || x > 64)) throw new UsageError(`--concurrency: expected numbers from 1 to 64 separated by commas, got "${flags.concurrency}"`)
    let prefill: number | undefined
    if (flags['prefill-tokens'] !== undefined) {
      const m = /^(\d+)([kK]?)$/.exec(flags['prefill-tokens'].trim())
      prefill = m ? Number(m[1]) * (m[2] ? 1024 : 1) : NaN
      if (!Number.isInteger(prefill) || prefill < 16 || prefill > 262144) throw new UsageError(`--prefill-tokens: expected a token count such as 512 or 32K, got "${flags['prefill-tokens']}"`)
    }
    if (flags.layers && !flags.preset) throw new UsageError('--layers needs --preset')
    const out = await runBench({
      model: flags.model,
      preset: flags.preset,
      layers: flags.layers,
      quick: flags.quick,
      runs: flags.runs,
      maxTokens: flags['max-tokens'],
      prefillTokens: prefill,
      concurrency: conc,
      reasoningEffort: flags['reasoning-effort'],
      temperature: flags.temperature,
      maxContext: flags['max-context'],
      out: flags.out,
      peer: flags.peer as 'llama.cpp' | undefined,
      gguf: flags.gguf,
      threads: flags.threads,
      draft: flags.draft as 'on' | 'off' | undefined,
    })
    this.log(out.table)
    this.log(`\nwrote ${out.jsonPath}\nwrote ${out.svgPath}`)
  }
}
