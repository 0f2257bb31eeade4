import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../cli/base-command.js'
import {sizeFlag} from '../../cli/flags.js'
import {formatBytes} from '../../config/units.js'
import {buildPackage} from '../../package/builder/builder.js'
import {buildKernels, KERNEL_TARGETS, type KernelTarget} from '../../package/builder/kernels-cuda.js'

export default class PackageBuild extends BaseCommand {
  static override summary = 'Build a Splash package from a Hugging Face or MLX checkpoint folder'
  static override examples = [
    '<%= config.bin %> package build ./Qwen3.5-27B --out ./qwen3.5-27b-q4',
    '<%= config.bin %> package build ./Qwen3.5-27B --out ./pkg --quant q8 --draft ./Qwen3.5-27B-DFlash --name me/qwen3.5-27b',
  ]

  static override args = {
    checkpoint: Args.string({description: 'Checkpoint folder: config.json + *.safetensors (+ tokenizer files)', required: true}),
  }

  static override flags = {
    out: Flags.string({char: 'o', summary: 'Folder to write the package into', required: true}),
    quant: Flags.string({summary: 'Weight format', options: ['q4', 'q8', 'bf16'], default: 'q4'}),
    draft: Flags.string({summary: 'DFlash draft checkpoint folder to include'}),
    name: Flags.string({summary: 'Model name clients use (default: the checkpoint folder name)'}),
    'shard-size': sizeFlag({summary: 'Largest weights file, e.g. 5G (default 20G; the hub takes files up to 50 GB)'}),
    kernels: Flags.string({summary: "Also compile kernels specialised to the package's shapes (needs nvcc)", options: [...KERNEL_TARGETS]}),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(PackageBuild)
    let m = await buildPackage({
      checkpoint: args.checkpoint,
      out: flags.out,
      quant: flags.quant as 'q4' | 'q8' | 'bf16',
      draft: flags.draft,
      name: flags.name,
      shardSize: flags['shard-size'],
      log: line => process.stderr.write(`${line}\n`),
    })
    if (flags.kernels) {
      m = await buildKernels(flags.out, {target: flags.kernels as KernelTarget, log: line => process.stderr.write(`${line}\n`)})
    }
    const size = m.files.reduce((n, f) => n + f.size, 0)
    this.log(`built ${m.name} (${m.family}, ${m.weights.quant}, ${formatBytes(size)}) in ${flags.out}`)
  }
}
