import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../cli/base-command.js'
import {SplashError} from '../../errors.js'
import {exportGguf, type ExportType} from '../../package/export/export-gguf.js'
import {exportHf, type HfDtype} from '../../package/export/export-hf.js'

export default class PackageExport extends BaseCommand {
  static override summary = 'Export a package for another engine: a GGUF file for llama.cpp, or a Transformers checkpoint and DFlash draft for vLLM and SGLang'
  static override examples = [
    '<%= config.bin %> package export --gguf model.gguf ./my-package',
    '<%= config.bin %> package export --gguf model-q8.gguf --type q8_0 ./my-package',
    '<%= config.bin %> package export --hf ./my-model-hf ./my-package',
  ]

  static override args = {
    package: Args.string({description: 'Package folder', required: true}),
  }

  static override flags = {
    gguf: Flags.string({summary: 'GGUF file to write', exactlyOne: ['gguf', 'hf']}),
    type: Flags.string({summary: 'GGUF tensor type of the linear weights (default: q4_0 for q4 packages, else q8_0)', options: ['q4_0', 'q8_0']}),
    hf: Flags.string({summary: 'Folder to write a Transformers checkpoint into (the draft goes to its draft/ folder)', exactlyOne: ['gguf', 'hf']}),
    dtype: Flags.string({summary: 'Weight dtype of the Transformers checkpoint', options: ['bfloat16', 'float32'], default: 'bfloat16'}),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(PackageExport)
    const log = (line: string) => process.stderr.write(`${line}\n`)
    if (flags.hf) {
      if (flags.type) throw new SplashError('invalid_flags', 'invalid_request', '--type applies to --gguf only')
      const r = await exportHf({dir: args.package, out: flags.hf, dtype: flags.dtype as HfDtype, log})
      this.log(`wrote ${flags.hf} (${r.tensors} tensors, ${(r.bytes / 1e6).toFixed(1)} MB${r.draft ? ', with the DFlash draft in draft/' : ''}); serve commands in ${flags.hf}/README.md`)
      return
    }
    const r = await exportGguf({dir: args.package, out: flags.gguf!, type: flags.type as ExportType | undefined, log})
    this.log(`wrote ${flags.gguf} (${r.arch}, ${r.type.toUpperCase()}, ${r.tensors} tensors, ${(r.bytes / 1e6).toFixed(1)} MB)`)
  }
}
