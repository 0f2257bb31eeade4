// A byte progress bar on stderr: bytes done / total, rate, ETA. Redrawn in place on a terminal; elsewhere one line
// every few seconds.
import {formatBytes} from '../config/units.js'

export interface Progress {
  start(total: number, label: string): void
  add(bytes: number): void
  done(): void
}

export const silentProgress: Progress = {start() {}, add() {}, done() {}}

export class ByteProgress implements Progress {
  private total = 0
  private bytes = 0
  private t0 = 0
  private last = 0
  private label = ''
  constructor(private readonly out: NodeJS.WriteStream = process.stderr, private readonly now = () => Date.now()) {}

  start(total: number, label: string): void {
    this.total = total
    this.bytes = 0
    this.label = label
    this.t0 = this.now()
    this.last = 0
    this.draw(true)
  }

  add(bytes: number): void {
    this.bytes += bytes
    this.draw(false)
  }

  done(): void {
    this.draw(true)
    if (this.out.isTTY) this.out.write('\n')
  }

  line(): string {
    const secs = Math.max((this.now() - this.t0) / 1000, 1e-3)
    const rate = this.bytes / secs
    const frac = this.total > 0 ? Math.min(1, this.bytes / this.total) : 1
    const width = 24
    const bar = '#'.repeat(Math.round(frac * width)).padEnd(width, '.')
    const eta = rate > 0 && this.total > this.bytes ? `${Math.ceil((this.total - this.bytes) / rate)}s` : '-'
    return `${this.label} [${bar}] ${formatBytes(this.bytes)} / ${formatBytes(this.total)}  ${formatBytes(rate)}/s  ETA ${eta}`
  }

  private draw(force: boolean): void {
    const t = this.now()
    const every = this.out.isTTY ? 100 : 5000
    if (!force && t - this.last < every) return
    this.last = t
    this.out.write(this.out.isTTY ? `\r${this.line()}\x1b[K` : `${this.line()}\n`)
  }
}
