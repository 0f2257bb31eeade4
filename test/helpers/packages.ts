// Fixture packages for end-to-end tests, made by the project's own synth command code (random weights in
// tiny real shapes) once per machine and reused (deterministic: same preset and seed, same files).
import {existsSync} from 'node:fs'
import {mkdir, rename, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {synthPackage} from '../../src/package/synth.js'
import type {Quant} from '../../src/package/manifest.js'

/** `draft`: a DFlash 2 draft with this sliding window instead of the preset's DFlash one. */
export async function synthFixture(preset = 'tiny-hybrid', quant: Quant = 'q4', draft?: {dflash2: {window: number}}): Promise<string> {
  const root = join(tmpdir(), 'splash-test-packages')
  const kind = draft ? `-dflash2w${draft.dflash2.window}` : ''
  const dir = join(root, `${preset}-${quant}${kind}-v1`)
  if (existsSync(join(dir, 'splash.json'))) return dir
  await mkdir(root, {recursive: true})
  const tmp = `${dir}.tmp-${process.pid}`
  await rm(tmp, {recursive: true, force: true})
  await synthPackage({preset, out: tmp, quant, seed: 7, ...(draft ? {draft: 'dflash2' as const, draftWindow: draft.dflash2.window} : {})})
  await rename(tmp, dir).catch(async () => rm(tmp, {recursive: true, force: true}))
  return dir
}
