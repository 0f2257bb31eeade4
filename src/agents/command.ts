// What the four launcher commands share: no flags of their own, every argument passed to the agent unchanged,
// and the agent's exit code as Splash's.
import {BaseCommand} from '../cli/base-command.js'
import {launchAgent} from './launch.js'
import type {AgentSpec} from './types.js'

/** The user's arguments for the agent: all of them, minus a leading "--" that only shields them from Splash. */
export function agentArgs(argv: string[]): string[] {
  return argv[0] === '--' ? argv.slice(1) : [...argv]
}

export abstract class LauncherCommand extends BaseCommand {
  static override strict = false
  static override usage = '<%= command.id %> [AGENT ARGUMENTS...]'
  static override description =
    'Finds the Splash server on 127.0.0.1 (SPLASH_PORT, default 8000; SPLASH_API_KEY when it needs a key), asks it ' +
    'for the served model and its context window, and starts the agent configured for it. Arguments pass through ' +
    'unchanged (put -- first to pass --help or --version to the agent), and the agent\'s exit code is Splash\'s. ' +
    'Config the launcher writes lives in Splash\'s data directory (SPLASH_DATA_DIR overrides it), never in the ' +
    'agent\'s own configuration.'

  protected abstract readonly agent: AgentSpec

  async run(): Promise<void> {
    const code = await launchAgent(this.agent, agentArgs(this.argv))
    process.exitCode = code
  }
}
