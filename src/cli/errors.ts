// Errors a command reports to the user as one line and an exit code.

export class UsageError extends Error {
  readonly exitCode: number
  constructor(message: string, exitCode = 2) {
    super(message)
    this.name = 'UsageError'
    this.exitCode = exitCode
  }
}
