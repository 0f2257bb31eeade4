import {Flags} from '@oclif/core'
import {readOptions} from '../config/options.js'
import {BaseCommand} from '../cli/base-command.js'
import {countFlag, hostFlag, portFlag, sizeFlag} from '../cli/flags.js'
import {startServer, stopOnSignals} from '../server/serve.js'

export default class Serve extends BaseCommand {
  static override summary = 'Serve a model package on 127.0.0.1 (OpenAI and Anthropic APIs, web UI)'
  static override examples = [
    '<%= config.bin %> serve',
    '<%= config.bin %> serve --model owner/repo --port 8001',
    '<%= config.bin %> serve --model ./my-package --max-context 100K --api-key secret',
  ]

  static override flags = {
    model: Flags.string({char: 'm', summary: 'Package to serve: owner/repo on the Hugging Face hub, or a local folder'}),
    port: portFlag({char: 'p', summary: 'Port to listen on (default: SPLASH_PORT, else 8000)', env: 'SPLASH_PORT'}),
    'max-memory': sizeFlag({summary: 'Ceiling on device memory allocations, e.g. 28G (default: auto)'}),
    'max-context': countFlag(256, 262144, 'a context length in tokens')({
      summary: "Longest context in tokens, e.g. 100K (default: the package's window, as memory allows; more than the package supports is refused)",
    }),
    'max-image-pixels': countFlag(1024, 1024 ** 3, 'a pixel count')({
      summary: 'Largest image in pixels after decoding (default 4M = 4,194,304)',
      default: 4194304,
    }),
    'allow-image-urls': Flags.boolean({summary: 'Fetch http(s) image URLs that requests name (default: only inline images)'}),
    'allowed-host': hostFlag({summary: 'Extra Host header name to accept (repeatable)', multiple: true}),
    'api-key': Flags.string({summary: 'Require this key as a Bearer token or x-api-key (default: SPLASH_API_KEY)', env: 'SPLASH_API_KEY'}),
    'no-webui': Flags.boolean({summary: 'Do not serve the chat page at /'}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(Serve)
    const log = (line: string) => this.log(line)
    const server = await startServer({
      port: flags.port ?? 8000,
      model: flags.model,
      maxMemory: flags['max-memory'],
      maxContext: flags['max-context'],
      maxImagePixels: flags['max-image-pixels'],
      allowImageUrls: flags['allow-image-urls'],
      allowedHosts: flags['allowed-host'] ?? [],
      apiKey: flags['api-key'] || undefined,
      webui: !flags['no-webui'],
      log,
    })
    await stopOnSignals(server, log)
  }
}
