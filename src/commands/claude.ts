import {LauncherCommand} from '../agents/command.js'
import {claude} from '../agents/claude.js'

export default class Claude extends LauncherCommand {
  static override summary = 'Start Claude Code against the running Splash server'
  static override examples = [
    '<%= config.bin %> claude',
    '<%= config.bin %> claude -p "explain src/index.ts"',
    'SPLASH_PORT=8001 <%= config.bin %> claude --continue',
  ]

  protected readonly agent = claude
}
