import {Flags} from '@oclif/core'
import {BaseCommand} from '../../cli/base-command.js'
import {formatBytes} from '../../config/units.js'
import {countFlag} from '../../cli/flags.js'
import {PRESETS} from '../../package/presets.js'
import {synthPackage} from '../../package/synth/synth.js'
import {buildKernels, KERNEL_TARGETS, type KernelTarget} from '../../package/builder/kernels-cuda.js'

export default class PackageSynth extends BaseCommand {
  static override summary = 'Write a package with random weights in the exact shapes of a real model'
  static override examples = [
    '<%= config.bin %> package synth --preset qwen3.8-27b --out ./synth-27b',
    '<%= config.bin %> package synth --preset qwen3.6-35b-a3b --layers 4 --out ./synth-35b-4l',
    '<%= config.bin %> package synth --preset tiny-hybrid --draft dflash2 --draft-window 24 --out ./tiny-dflash2',
  ]

  static override flags = {
    preset: Flags.string({summary: 'Model shape', options: Object.keys(PRESETS), required: true}),
    out: Flags.string({char: 'o', summary: 'Folder to write the package into', required: true}),
    layers: Flags.integer({summary: 'Keep only the first N layers (same shapes), for quick checks', min: 1}),
    quant: Flags.string({summary: 'Weight format', options: ['q4', 'q8', 'bf16'], default: 'q4'}),
    seed: Flags.integer({summary: 'Random seed (same seed, same files)', default: 0, min: 0}),
    name: Flags.string({summary: 'Model name clients use (default: splash/synth-<preset>)'}),
    draft: Flags.string({summary: 'Draft kind: DFlash, or DFlash 2 (conv, candidate selector, sliding window)', options: ['dflash', 'dflash2'], default: 'dflash'}),
    'draft-window': Flags.integer({summary: 'Sliding window of a DFlash 2 draft', default: 2048, min: 1}),
    context: countFlag(256, 1024 ** 2, 'a context length in tokens')({summary: "The package's context window, e.g. 128K (default: the preset's)"}),
    kernels: Flags.string({summary: "Also compile kernels specialised to the package's shapes (needs nvcc)", options: [...KERNEL_TARGETS]}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(PackageSynth)
    let m = await synthPackage({
      preset: flags.preset,
      out: flags.out,
      layers: flags.layers,
      quant: flags.quant as 'q4' | 'q8' | 'bf16',
      seed: flags.seed,
      name: flags.name,
      draft: flags.draft as 'dflash' | 'dflash2',
      draftWindow: flags['draft-window'],
      context: flags.context,
      log: line => process.stderr.write(`${line}\n`),
    })
    if (flags.kernels) {
      m = await buildKernels(flags.out, {target: flags.kernels as KernelTarget, log: line => process.stderr.write(`${line}\n`)})
    }
    const size = m.files.reduce((n, f) => n + f.size, 0)
    this.log(`wrote ${m.name} (${m.config.num_hidden_layers} layers, ${m.weights.quant}, ${formatBytes(size)}) in ${flags.out}`)
  }
}
