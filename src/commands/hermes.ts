import {LauncherCommand} from '../agents/command.js'
import {hermes} from '../agents/hermes.js'

export default class Hermes extends LauncherCommand {
  static override summary = 'Start Hermes Agent against the running Splash server'
  static override examples = ['<%= config.bin %> hermes', '<%= config.bin %> hermes chat -q "summarise this repository"']

  protected readonly agent = hermes
}
