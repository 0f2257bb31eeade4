// The DFlash 2 reference fixtures (test/fixtures/dflash2/*.json, tools/reference/dflash2_reference.py) and the
// package each runs on: the synthetic tiny-qwen3 bf16 package with a DFlash 2 draft, or, for a fixture with
// `overrides` (draft.config keys), a copy of it whose splash.json carries them.
import {cp, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {readFileSync, readdirSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {synthFixture} from '../../helpers/packages.js'

export interface Fixture {
  package: {preset: string; quant: 'bf16'; window: number}
  overrides: Record<string, unknown>
  prompt: number[]
  anchor: number
  logits: number[]
  greedy: number[]
  greedy_min_margin: number
  temperature: number
  uniforms: number[]
  sampled: number[]
}

const FIXTURES = new URL('../../fixtures/dflash2/', import.meta.url)

export function fixtureFiles(): string[] {
  return readdirSync(FIXTURES).filter(f => f.endsWith('.json'))
}

export function readFixture(file: string): Fixture {
  return JSON.parse(readFileSync(new URL(file, FIXTURES), 'utf8')) as Fixture
}

/** The fixture's package directory; a copy (removed by `cleanup`) when it has overrides. */
export async function fixturePackage(fx: Fixture, cleanup: (fn: () => Promise<void>) => void): Promise<string> {
  const dir = await synthFixture(fx.package.preset, fx.package.quant, {dflash2: {window: fx.package.window}})
  if (Object.keys(fx.overrides).length === 0) return dir
  const copy = await mkdtemp(join(tmpdir(), 'splash-draft2-'))
  cleanup(() => rm(copy, {recursive: true, force: true}))
  await cp(dir, copy, {recursive: true})
  const m = JSON.parse(await readFile(join(copy, 'splash.json'), 'utf8'))
  m.draft.config = {...m.draft.config, ...fx.overrides}
  await writeFile(join(copy, 'splash.json'), JSON.stringify(m))
  return copy
}

/** max |a − ref| / max |ref| */
export function relError(a: ArrayLike<number>, ref: ArrayLike<number>): number {
  let diff = 0
  let scale = 0
  for (let i = 0; i < ref.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - ref[i]))
    scale = Math.max(scale, Math.abs(ref[i]))
  }
  return diff / scale
}
