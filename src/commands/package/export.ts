import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../cli/base-command.js'
import {exportGguf, type ExportType} from '../../package/export/export-gguf.js'

export default class PackageExport extends BaseCommand {
  static override summary = 'Export a package for another engine: a GGUF file that llama.cpp loads (qwen35, qwen35moe, qwen3)'
  static override examples = [
    '<%= config.bin %> package export --gguf model.gguf ./my-package',
    '<%= config.bin %> package export --gguf model-q8.gguf --type q8_0 ./my-package',
  ]

  static override args = {
    package: Args.string({description: 'Package folder', required: true}),
  }

  static override flags = {
    gguf: Flags.string({summary: 'GGUF file to write', required: true}),
    type: Flags.string({summary: 'Tensor type of the linear weights (default: q4_0 for q4 packages, else q8_0)', options: ['q4_0', 'q8_0']}),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(PackageExport)
    const r = await exportGguf({dir: args.package, out: flags.gguf, type: flags.type as ExportType | undefined, log: line => process.stderr.write(`${line}\n`)})
    this.log(`wrote ${flags.gguf} (${r.arch}, ${r.type.toUpperCase()}, ${r.tensors} tensors, ${(r.bytes / 1e6).toFixed(1)} MB)`)
  }
}
