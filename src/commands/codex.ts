import {LauncherCommand} from '../agents/command.js'
import {codex} from '../agents/codex.js'

export default class Codex extends LauncherCommand {
  static override summary = 'Start the Codex CLI against the running Splash server'
  static override examples = [
    '<%= config.bin %> codex',
    '<%= config.bin %> codex exec "add a test for parseArgs"',
    '<%= config.bin %> codex -- --help',
  ]

  protected readonly agent = codex
}
