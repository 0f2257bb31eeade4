import {Args} from '@oclif/core'
import {BaseCommand} from '../cli/base-command.js'
import {formatBytes} from '../config/units.js'
import {ByteProgress} from '../package/progress.js'
import {pullPackage} from '../package/resolve.js'

export default class Pull extends BaseCommand {
  static override summary = 'Download a package from the Hugging Face hub into the cache and verify it'
  static override description =
    'Uses HF_TOKEN for private repos, HF_ENDPOINT for another hub, and the standard cache (HF_HUB_CACHE, HF_HOME/hub or ~/.cache/huggingface/hub). An interrupted download resumes where it stopped.'
  static override examples = ['<%= config.bin %> pull owner/repo']

  static override args = {
    repo: Args.string({description: 'Hub repo id: owner/name', required: true}),
  }

  async run(): Promise<void> {
    const {args} = await this.parse(Pull)
    const r = await pullPackage(args.repo, {progress: new ByteProgress(), log: line => process.stderr.write(`${line}\n`)})
    const size = r.manifest.files.reduce((n, f) => n + f.size, 0)
    const from = r.source === 'hub' ? '' : ' (hub unreachable: cached copy)'
    this.log(`${r.manifest.name}: ${formatBytes(size)} verified in ${r.dir}${from}`)
  }
}
