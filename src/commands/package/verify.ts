import {Args} from '@oclif/core'
import {BaseCommand} from '../../cli/base-command.js'
import {formatBytes} from '../../config/units.js'
import {verifySpec} from '../../package/resolve.js'

export default class PackageVerify extends BaseCommand {
  static override summary = 'Check every file of a package (size, then sha256) against its splash.json'
  static override examples = ['<%= config.bin %> package verify ./my-package', '<%= config.bin %> package verify owner/repo']

  static override args = {
    package: Args.string({description: 'Package folder, or owner/repo in the Hugging Face cache', required: true}),
  }

  async run(): Promise<void> {
    const {args} = await this.parse(PackageVerify)
    const {dir, manifest, problems} = await verifySpec(args.package)
    if (problems.length > 0) {
      for (const p of problems) process.stderr.write(`${p.problem === 'missing' ? 'missing' : 'bad'}: ${p.detail}\n`)
      process.stderr.write(`Error: ${problems.length} of ${manifest.files.length} files of ${dir} do not match splash.json\n`)
      return this.exit(1)
    }
    const size = manifest.files.reduce((n, f) => n + f.size, 0)
    this.log(`ok: ${manifest.name}: ${manifest.files.length} files, ${formatBytes(size)} verified in ${dir}`)
  }
}
