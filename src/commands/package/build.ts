import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../cli/base-command.js'
import {sizeFlag} from '../../cli/flags.js'
import {formatBytes} from '../../config/units.js'
import {buildFromSource} from '../../package/hub/build-source.js'
import {buildKernels, KERNEL_TARGETS, type KernelTarget} from '../../package/builder/kernels-cuda.js'
import {ByteProgress} from '../../package/progress.js'

export default class PackageBuild extends BaseCommand {
  static override summary = 'Build a Splash package from a Hugging Face or MLX checkpoint: a folder, or a hub repo downloaded into the cache'
  static override description =
    'A hub repo is checked from its metadata first (architecture, tensor shapes, the draft against the target), then downloaded into the Hugging Face cache with resume and sha256 verification. Uses HF_TOKEN for private and gated repos and HF_ENDPOINT for another hub.'
  static override examples = [
    '<%= config.bin %> package build Qwen/Qwen3.5-27B --draft z-lab/Qwen3.5-27B-DFlash --out ./qwen3.5-27b-q4',
    '<%= config.bin %> package build ./Qwen3.5-27B --out ./pkg --quant q8 --draft ./Qwen3.5-27B-DFlash --name me/qwen3.5-27b',
    '<%= config.bin %> package build Qwen/Qwen3.5-27B --draft z-lab/Qwen3.5-27B-DFlash --push me/qwen3.5-27b-splash',
  ]

  static override args = {
    checkpoint: Args.string({description: 'Checkpoint folder (config.json + *.safetensors + tokenizer files) or hub repo id owner/name', required: true}),
  }

  static override flags = {
    out: Flags.string({char: 'o', summary: 'Folder to write the package into'}),
    push: Flags.string({summary: 'Hub repo (owner/name) to upload the package to (needs HF_TOKEN with write access)'}),
    'dry-run': Flags.boolean({summary: 'With --push: build, verify and list what would be uploaded, without uploading', dependsOn: ['push']}),
    quant: Flags.string({summary: 'Weight format', options: ['q4', 'q8', 'bf16'], default: 'q4'}),
    draft: Flags.string({summary: 'DFlash draft checkpoint to include: a folder or a hub repo id'}),
    name: Flags.string({summary: 'Model name clients use (default: the repo id, or the checkpoint folder name)'}),
    'shard-size': sizeFlag({summary: 'Largest weights file, e.g. 5G (default 20G; the hub takes files up to 50 GB)'}),
    kernels: Flags.string({summary: "Also compile kernels specialised to the package's shapes (needs nvcc)", options: [...KERNEL_TARGETS]}),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(PackageBuild)
    const log = (line: string) => process.stderr.write(`${line}\n`)
    const r = await buildFromSource({
      source: args.checkpoint,
      out: flags.out,
      push: flags.push,
      dryRun: flags['dry-run'],
      quant: flags.quant as 'q4' | 'q8' | 'bf16',
      draft: flags.draft,
      name: flags.name,
      shardSize: flags['shard-size'],
      progress: new ByteProgress(),
      log,
      afterBuild: flags.kernels ? dir => buildKernels(dir, {target: flags.kernels as KernelTarget, log}) : undefined,
    })
    const m = r.manifest
    const size = m.files.reduce((n, f) => n + f.size, 0)
    this.log(`built ${m.name} (${m.family}, ${m.weights.quant}, ${formatBytes(size)})${r.out ? ` in ${r.out}` : ''}`)
    if (r.pushed) this.log(r.pushed.commit ? `pushed to ${r.pushed.repo} (${r.pushed.commit.slice(0, 12)})` : `dry run: ${r.pushed.files.length} files would go to ${r.pushed.repo}`)
  }
}
