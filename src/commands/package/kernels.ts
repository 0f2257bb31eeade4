import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../cli/base-command.js'
import {buildKernels, KERNEL_TARGETS, type KernelTarget} from '../../package/builder/kernels-cuda.js'

export default class PackageKernels extends BaseCommand {
  static override summary = "Compile kernels specialised to a package's weight shapes into it (needs nvcc)"
  static override examples = ['<%= config.bin %> package kernels ./qwen3.5-27b-q4 --target cuda-sm90']

  static override args = {
    package: Args.string({description: 'Package folder (splash.json and its weights)', required: true}),
  }

  static override flags = {
    target: Flags.string({summary: 'Kernel target', options: [...KERNEL_TARGETS], default: 'cuda-sm90'}),
    nvcc: Flags.string({summary: 'CUDA compiler (default: $SPLASH_NVCC, nvcc on PATH, /usr/local/cuda/bin/nvcc)'}),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(PackageKernels)
    const m = await buildKernels(args.package, {
      target: flags.target as KernelTarget,
      nvcc: flags.nvcc,
      log: line => process.stderr.write(`${line}\n`),
    })
    const k = m.kernels.find(e => e.backend === 'cuda' && e.arch === 'sm_90')
    this.log(`added ${k?.file} (cuda sm_90, ABI ${k?.abi}) to ${m.name} in ${args.package}`)
  }
}
