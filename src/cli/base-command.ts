// Base class for every splash command: turns errors into one line on stderr and an exit code.
import {Command} from '@oclif/core'
import {UsageError} from './errors.js'
import {SplashError} from '../errors.js'

/** The one line worth showing from an oclif parse error ("Parsing --x\n\t--x: expected ..."). */
export function oneLine(message: string): string {
  const lines = message
    .split('\n')
    .map(l => l.trim())
    .filter(l => l.length > 0 && !l.startsWith('See more help'))
  return lines[lines.length - 1] ?? message
}

export abstract class BaseCommand extends Command {
  protected override async catch(err: Error & {exitCode?: number; oclif?: {exit?: number}}): Promise<unknown> {
    if (err instanceof UsageError) {
      process.stderr.write(`Error: ${oneLine(err.message)}\n`)
      return this.exit(err.exitCode)
    }
    if (err instanceof SplashError) {
      process.stderr.write(`Error: ${err.message}\n`)
      return this.exit(1)
    }
    // oclif own errors (parse failures, unknown flags) carry an exit code; an exit() call carries code 0.
    if (err.oclif?.exit !== undefined && err.oclif.exit !== 0 && err.message) {
      process.stderr.write(`Error: ${oneLine(err.message)}\n`)
      return this.exit(err.oclif.exit)
    }
    return super.catch(err)
  }
}
