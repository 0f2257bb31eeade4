// Custom oclif flags shared by commands: sizes with K/M/G suffixes, bounded counts, ports.
import {Flags} from '@oclif/core'
import {parseScaled} from '../config/units.js'
import {UsageError} from './errors.js'

export const sizeFlag = Flags.custom<number>({
  async parse(input, _ctx, opts) {
    const value = parseScaled(input)
    if (value === undefined || value <= 0) {
      throw new UsageError(`--${opts.name}: expected a size such as 512M, 28G or a number of bytes, got "${input}"`)
    }
    return value
  },
})

export function countFlag(min: number, max: number, what: string) {
  return Flags.custom<number>({
    async parse(input, _ctx, opts) {
      const value = parseScaled(input)
      if (value === undefined || value < min || value > max) {
        throw new UsageError(
          `--${opts.name}: expected ${what} between ${min} and ${max} (K/M suffixes allowed, e.g. 100K), got "${input}"`,
        )
      }
      return value
    },
  })
}

export const portFlag = Flags.custom<number>({
  async parse(input, _ctx, opts) {
    const value = /^\d+$/.test(input.trim()) ? Number(input) : NaN
    if (!Number.isInteger(value) || value < 0 || value > 65535) {
      throw new UsageError(`--${opts.name}: expected a port number between 0 and 65535, got "${input}"`)
    }
    return value
  },
})

export const hostFlag = Flags.custom<string>({
  async parse(input, _ctx, opts) {
    const host = input.trim().toLowerCase()
    if (!/^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9.-]*[a-z0-9])?)$/.test(host)) {
      throw new UsageError(`--${opts.name}: expected a host name such as my-box.local, got "${input}"`)
    }
    return host
  },
})
