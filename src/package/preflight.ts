// Checks a package's weight files against its manifest before the native core opens them, so that a broken package
// is refused with the file, the tensor, and what was expected and found. The expected tensors are the layout of the
// config (layout.ts) in the package's storage (weights.ts), what the builder writes and builder.test.ts checks.
import {join} from 'node:path'
import {SplashError} from '../errors.js'
import type {Manifest} from './manifest.js'
import {draftLayout, modelLayout, visionLayout, type LayoutEntry} from './layout.js'
import {SafetensorsReader, type TensorSpec} from './safetensors.js'
import {specsFor, storageFor} from './builder/weights.js'

function wrong(message: string): SplashError {
  return new SplashError('invalid_package', 'invalid_request', message)
}

const shape = (s: readonly number[]) => `[${s.join(', ')}]`

/** The tensors `entries` are stored as in a package of this quantization. */
function expected(entries: LayoutEntry[], quant: Manifest['weights']['quant']): Array<TensorSpec & {logical: number[]}> {
  return entries.flatMap(e => specsFor(e.name, e.shape, storageFor(e.kind, e.shape, quant, e.q8, e.keep16)).map(s => ({...s, logical: e.shape})))
}

/** Every expected tensor is in one of `files` with its dtype and shape; throws naming the first that is not. */
async function checkFiles(dir: string, files: string[], want: Array<TensorSpec & {logical: number[]}>, what: string): Promise<void> {
  const found = new Map<string, {file: string; dtype: string; shape: number[]}>()
  for (const file of files) {
    const r = await SafetensorsReader.open(join(dir, file))
    try {
      for (const [name, t] of r.tensors) found.set(name, {file, dtype: t.dtype, shape: t.shape})
    } finally {
      await r.close()
    }
  }
  const where = files.length === 1 ? join(dir, files[0]!) : `${what} files (${files.join(', ')})`
  for (const w of want) {
    const t = found.get(w.name)
    if (!t) throw wrong(`${where}: tensor ${w.name} is missing (the ${what} config in splash.json implies ${w.dtype} ${shape(w.shape)}, a ${shape(w.logical)} weight)`)
    if (t.dtype !== w.dtype || shape(t.shape) !== shape(w.shape)) {
      throw wrong(`${join(dir, t.file)}: tensor ${w.name} is ${t.dtype} ${shape(t.shape)}, expected ${w.dtype} ${shape(w.shape)} (a ${shape(w.logical)} weight, from the ${what} config in splash.json)`)
    }
  }
}

/** The package's model, vision and draft tensors against its manifest. */
export async function preflightPackage(dir: string, m: Manifest): Promise<void> {
  const quant = m.weights.quant
  const model = [...modelLayout(m.config), ...(m.vision ? visionLayout(m.vision.config) : [])]
  await checkFiles(dir, m.weights.files, expected(model, quant), 'model')
  if (m.draft) await checkFiles(dir, m.draft.files, expected(draftLayout(m.draft.config, m.config.hidden_size, m.config.vocab_size), quant), 'draft')
}
