// The last step of writing a package: list every file it uses with its size and sha256, validate, write splash.json.
import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {formatManifest, MANIFEST_FILE, validateManifest, type FileEntry, type Manifest} from '../manifest.js'
import {fileEntry} from '../verify.js'

/** `known` holds entries already computed while writing (synth hashes as it writes). */
export async function finishPackage(out: string, m: Omit<Manifest, 'files'>, known?: Map<string, FileEntry>): Promise<Manifest> {
  const paths = [
    ...m.weights.files,
    ...(m.draft?.files ?? []),
    m.tokenizer.file,
    m.tokenizer.chat_template,
    ...m.kernels.map(k => k.file),
  ]
  const files = []
  for (const p of [...new Set(paths)]) files.push(known?.get(p) ?? (await fileEntry(out, p)))
  const manifest = validateManifest({...m, files}, join(out, MANIFEST_FILE))
  await writeFile(join(out, MANIFEST_FILE), formatManifest(manifest))
  return manifest
}
