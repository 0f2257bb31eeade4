import {LauncherCommand} from '../agents/command.js'
import {opencode} from '../agents/opencode.js'

export default class Opencode extends LauncherCommand {
  static override summary = 'Start opencode against the running Splash server'
  static override examples = ['<%= config.bin %> opencode', '<%= config.bin %> opencode run "fix the failing test"']

  protected readonly agent = opencode
}
