// SPLASH_TRACE_STEPS=FILE: one line per engine step appended to FILE — the wall time of each phase (schedule,
// which admits requests and restores cached prefixes; the draft pass; the model step; postprocess; the prefix
// cache saves after it) and what the step computed. For taking a request's latency apart; off by default.
import {appendFileSync} from 'node:fs'
import type {StepItem} from './step-model.js'
import {readOptions} from '../config/options.js'

export class StepTrace {
  private t0 = 0
  private last = 0
  private parts: string[] = []

  private constructor(private readonly file: string) {}

  static fromEnv(env: NodeJS.ProcessEnv = process.env): StepTrace | undefined {
    const file = readOptions(env).traceSteps
    return file ? new StepTrace(file) : undefined
  }

  begin(): void {
    this.t0 = this.last = performance.now()
    this.parts = []
  }

  mark(phase: string): void {
    const now = performance.now()
    this.parts.push(`${phase}=${(now - this.last).toFixed(2)}`)
    this.last = now
  }

  end(items: readonly StepItem[]): void {
    const tokens = items.reduce((n, it) => n + it.tokens.length, 0)
    const verify = items.filter(it => it.verify).length
    // total: begin() to the last mark, so the phases add up to it (what end() does after is the trace's own cost)
    const line = `${new Date().toISOString()} total=${(this.last - this.t0).toFixed(2)}ms ${this.parts.join(' ')} items=${items.length} tokens=${tokens} verify=${verify}\n`
    try {
      appendFileSync(this.file, line)
    } catch {
      // tracing never fails a step
    }
  }
}
