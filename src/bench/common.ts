// Shared pieces of the benchmarks: synthetic packages cached per preset, the machine description, statistics.
import {existsSync, readFileSync} from 'node:fs'
import {readOptions} from '../config/options.js'
import {cpus, totalmem} from 'node:os'
import {join} from 'node:path'
import {execFileSync} from 'node:child_process'
import {dataDir} from '../package/paths.js'
import {builderId} from '../package/version.js'
import {synthPackage} from '../package/synth/synth.js'

export type Log = (line: string) => void

/** Progress goes to stderr so stdout keeps only the table. */
export const progress: Log = line => process.stderr.write(`${line}\n`)

export function benchCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return readOptions(env).benchCache ?? join(dataDir(env), 'bench')
}

/** A synthetic q4 package of a preset (optionally cut to `layers`), written once into the bench cache. */
export async function presetPackage(preset: string, layers: number | undefined, log: Log = progress): Promise<string> {
  const dir = join(benchCacheDir(), `${preset}${layers ? `-${layers}l` : ''}-q4`)
  if (existsSync(join(dir, 'splash.json'))) return dir
  log(`synthesising ${preset}${layers ? ` (${layers} layers)` : ''} into ${dir}`)
  await synthPackage({preset, out: dir, quant: 'q4', layers, log})
  return dir
}

export interface Machine {
  cpu: string
  cores: number
  memoryBytes: number
  gpu: string | null
  platform: string
  node: string
}

export function machine(): Machine {
  let gpu: string | null = null
  try {
    gpu = execFileSync('nvidia-smi', ['--query-gpu=name,memory.total', '--format=csv,noheader'], {encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'ignore']})
      .trim()
      .split('\n')
      .join('; ') || null
  } catch {
    gpu = null
  }
  const c = cpus()
  return {cpu: c[0]?.model ?? 'unknown', cores: c.length, memoryBytes: totalmem(), gpu, platform: `${process.platform}-${process.arch}`, node: process.version}
}

export function splashVersion(): string {
  return builderId()
}

export interface Stats {
  median: number
  min: number
  max: number
  n: number
}

export function stats(values: number[]): Stats {
  const v = values.filter(x => Number.isFinite(x)).sort((a, b) => a - b)
  if (v.length === 0) return {median: NaN, min: NaN, max: NaN, n: 0}
  const mid = v.length >> 1
  const median = v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2
  return {median, min: v[0], max: v[v.length - 1], n: v.length}
}

export function fmt(x: number, digits = 1): string {
  if (!Number.isFinite(x)) return '–'
  if (Math.abs(x) >= 1000) return x.toFixed(0)
  return x.toFixed(digits)
}

/** "12.3 (11.9–12.8)": median and range. */
export function fmtStats(s: Stats, digits = 1): string {
  if (s.n === 0) return '–'
  return s.n > 1 ? `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})` : fmt(s.median, digits)
}

export function readJson<T>(file: string): T {
  return JSON.parse(readFileSync(file, 'utf8')) as T
}
