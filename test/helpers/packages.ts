// Fixture packages for end-to-end tests, made by the project's own synth command code (random weights in
// tiny real shapes) once per machine and reused (deterministic: same preset and seed, same files).
import {createHash} from 'node:crypto'
import {existsSync} from 'node:fs'
import {cp, mkdir, readFile, rename, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {synthPackage} from '../../src/package/synth/synth.js'
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

/**
 * A copy of `src` (a package with a q4 draft) whose draft's packed weights are replaced by seeded random nibbles:
 * a draft of the same shapes and cost that predicts nothing (scales, norms and the target untouched; the manifest's
 * hash follows). Made once per machine, like the fixtures.
 */
export async function uselessDraftFixture(src: string): Promise<string> {
  const dir = join(tmpdir(), 'splash-test-packages', 'useless-draft-v1')
  if (existsSync(join(dir, 'splash.json'))) return dir
  await mkdir(join(tmpdir(), 'splash-test-packages'), {recursive: true})
  const tmp = `${dir}.tmp-${process.pid}`
  await rm(tmp, {recursive: true, force: true})
  await cp(src, tmp, {recursive: true})
  const file = join(tmp, 'draft.safetensors')
  const bytes = await readFile(file)
  const n = Number(bytes.readBigUInt64LE(0))
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString()) as Record<string, {dtype: string; data_offsets: [number, number]}>
  let x = 0x9e3779b9 // xorshift32
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__' || t.dtype !== 'U32') continue
    for (let i = 8 + n + t.data_offsets[0]; i < 8 + n + t.data_offsets[1]; i++) {
      x ^= x << 13
      x ^= x >>> 17
      x ^= x << 5
      bytes[i] = x & 0xff
    }
  }
  await writeFile(file, bytes)
  const manifest = JSON.parse(await readFile(join(tmp, 'splash.json'), 'utf8')) as {files: {path: string; size: number; sha256: string}[]}
  for (const f of manifest.files) if (f.path === 'draft.safetensors') f.sha256 = createHash('sha256').update(bytes).digest('hex')
  await writeFile(join(tmp, 'splash.json'), JSON.stringify(manifest, null, 2))
  await rename(tmp, dir).catch(async () => rm(tmp, {recursive: true, force: true}))
  return dir
}
