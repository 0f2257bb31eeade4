// `splash package export --hf DIR`: a package as a Transformers checkpoint that vLLM and SGLang serve, with its
// DFlash draft beside it. The target goes to DIR (config.json, model*.safetensors, tokenizer, chat template,
// generation_config.json), the 4-bit and 8-bit weights dequantised to bf16 (or float32); the draft goes to DIR/draft
// in the z-lab DFlash layout (export-hf-map.ts); DIR/README.md holds the serve commands. The safetensors files are
// plain (no alignment padding tensors), since the Python loaders reject tensors they do not know.
import {copyFile, mkdir, open, readFile, writeFile, type FileHandle} from 'node:fs/promises'
import {join} from 'node:path'
import {SplashError} from '../../errors.js'
import {dequantAffine} from './gguf-encode.js'
import {PackageTensors} from './export-gguf.js'
import {draftConfig, draftTensors, targetConfig, targetTensors, type HfTensor} from './export-hf-map.js'
import {exportReadme} from './export-hf-readme.js'
import {readManifest, type Manifest} from '../manifest.js'
import {toBf16} from '../builder/quantize.js'

export type HfDtype = 'bfloat16' | 'float32'

export interface HfExportOptions {
  dir: string
  out: string
  dtype?: HfDtype
  /** Largest target weights file in bytes (default 5 GB, the size transformers' save_pretrained uses). */
  shardSize?: number
  /** Hub repo id or folder the README's commands name (default: the output folder). */
  servedAs?: string
  log?: (line: string) => void
}

export interface HfExportResult {
  tensors: number
  bytes: number
  files: string[]
  draft: boolean
}

const ROWS = 1024

/** Writes tensors into one safetensors file, row block by row block. */
async function writeFileOf(path: string, tensors: HfTensor[], src: PackageTensors, dtype: HfDtype): Promise<number> {
  const width = dtype === 'bfloat16' ? 2 : 4
  const header: Record<string, unknown> = {__metadata__: {format: 'pt'}}
  let at = 0
  for (const t of tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1) * width
    header[t.name] = {dtype: dtype === 'bfloat16' ? 'BF16' : 'F32', shape: t.shape, data_offsets: [at, at + n]}
    at += n
  }
  let json = JSON.stringify(header)
  json += ' '.repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8)
  const head = Buffer.alloc(8 + Buffer.byteLength(json))
  head.writeBigUInt64LE(BigInt(Buffer.byteLength(json)))
  head.write(json, 8)
  let fh: FileHandle | undefined
  try {
    fh = await open(path, 'w')
    let pos = 0
    const put = async (b: Uint8Array) => {
      await fh!.write(b, 0, b.length, pos)
      pos += b.length
    }
    await put(head)
    for (const t of tensors) {
      for (const s of t.segments) {
        for (let r0 = s.r0; r0 < s.r1; r0 += ROWS) {
          const r1 = Math.min(s.r1, r0 + ROWS)
          const got = await src.block(s.name, t.cols, r0, r1)
          const v = got instanceof Float32Array ? Float32Array.from(got) : dequantAffine(got)
          if (t.minusOne) for (let i = 0; i < v.length; i++) v[i] -= 1
          const bytes = dtype === 'bfloat16' ? toBf16(v) : v
          await put(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength))
        }
      }
    }
    return pos
  } finally {
    await fh?.close()
  }
}

/** Splits tensors into files of at most `limit` bytes (a tensor larger than the limit gets a file of its own). */
function shards(tensors: HfTensor[], width: number, limit: number): HfTensor[][] {
  const out: HfTensor[][] = [[]]
  let size = 0
  for (const t of tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1) * width
    if (size > 0 && size + n > limit) {
      out.push([])
      size = 0
    }
    out[out.length - 1].push(t)
    size += n
  }
  return out
}

async function writeWeights(dir: string, tensors: HfTensor[], src: PackageTensors, dtype: HfDtype, limit: number): Promise<{files: string[]; bytes: number}> {
  const parts = shards(tensors, dtype === 'bfloat16' ? 2 : 4, limit)
  const pad = (i: number) => String(i).padStart(5, '0')
  const names = parts.length === 1 ? ['model.safetensors'] : parts.map((_, i) => `model-${pad(i + 1)}-of-${pad(parts.length)}.safetensors`)
  let bytes = 0
  for (let i = 0; i < parts.length; i++) bytes += await writeFileOf(join(dir, names[i]), parts[i], src, dtype)
  if (parts.length > 1) {
    const weight_map: Record<string, string> = {}
    parts.forEach((p, i) => p.forEach(t => (weight_map[t.name] = names[i])))
    await writeFile(join(dir, 'model.safetensors.index.json'), JSON.stringify({metadata: {total_size: bytes}, weight_map}, null, 2) + '\n')
    names.push('model.safetensors.index.json')
  }
  return {files: names, bytes}
}

/** The tokenizer files transformers reads: tokenizer.json, the chat template, tokenizer_config.json naming EOS. */
async function writeTokenizer(m: Manifest, dir: string, out: string): Promise<string[]> {
  const tokJson = await readFile(join(dir, m.tokenizer.file), 'utf8')
  await copyFile(join(dir, m.tokenizer.file), join(out, 'tokenizer.json'))
  await copyFile(join(dir, m.tokenizer.chat_template), join(out, 'chat_template.jinja'))
  const added = ((JSON.parse(tokJson) as {added_tokens?: {id: number; content: string}[]}).added_tokens ?? [])
  const name = (id: number | null) => (id === null ? null : added.find(t => t.id === id)?.content ?? null)
  const tc = {
    tokenizer_class: 'PreTrainedTokenizerFast',
    eos_token: name(m.tokenizer.eos_token_ids[0]),
    pad_token: name(m.tokenizer.pad_token_id),
    model_max_length: m.config.max_position_embeddings,
  }
  await writeFile(join(out, 'tokenizer_config.json'), JSON.stringify(tc, null, 2) + '\n')
  const gen = {eos_token_id: m.tokenizer.eos_token_ids, pad_token_id: m.tokenizer.pad_token_id}
  await writeFile(join(out, 'generation_config.json'), JSON.stringify(gen, null, 2) + '\n')
  return ['tokenizer.json', 'chat_template.jinja', 'tokenizer_config.json', 'generation_config.json']
}

export async function exportHf(o: HfExportOptions): Promise<HfExportResult> {
  const log = o.log ?? (() => undefined)
  const dtype = o.dtype ?? 'bfloat16'
  const m = await readManifest(o.dir)
  await mkdir(o.out, {recursive: true})
  const tensors = targetTensors(m)
  const src = await PackageTensors.open(o.dir, m.weights.files)
  const files: string[] = []
  let bytes = 0
  try {
    log(`${m.name} (${m.family}, ${m.weights.quant}) → ${o.out}: ${tensors.length} tensors as ${dtype}`)
    const w = await writeWeights(o.out, tensors, src, dtype, o.shardSize ?? 5e9)
    files.push(...w.files)
    bytes += w.bytes
  } finally {
    await src.close()
  }
  await writeFile(join(o.out, 'config.json'), JSON.stringify(targetConfig(m, dtype), null, 2) + '\n')
  files.push('config.json', ...(await writeTokenizer(m, o.dir, o.out)))
  if (m.vision) log('the vision tower is not exported: the checkpoint is the text model')
  let draft = false
  const d = m.draft?.config
  if (d && (d.conv_kernel_size !== null || d.selector_rank !== null)) {
    log('the draft is a DFlash 2 draft (block convolutions, candidate selector), which vLLM and SGLang do not load: not exported')
  } else if (d) {
    if (d.hidden_size !== m.config.hidden_size) {
      throw new SplashError('export_unsupported', 'invalid_request', `${o.dir}: the draft's hidden size ${d.hidden_size} differs from the target's ${m.config.hidden_size}; SGLang's DFlash loader needs them equal`)
    }
    const ddir = join(o.out, 'draft')
    await mkdir(ddir, {recursive: true})
    const dsrc = await PackageTensors.open(o.dir, m.draft!.files)
    try {
      bytes += await writeFileOf(join(ddir, 'model.safetensors'), draftTensors(d, m.config.hidden_size, m.config.vocab_size), dsrc, dtype)
    } finally {
      await dsrc.close()
    }
    await writeFile(join(ddir, 'config.json'), JSON.stringify(draftConfig(m, dtype), null, 2) + '\n')
    files.push('draft/model.safetensors', 'draft/config.json')
    log(`draft: ${d.num_hidden_layers} layers tapping target layers [${d.target_layer_ids}] → ${ddir}`)
    draft = true
  } else {
    log('the package has no draft: only the target is exported')
  }
  await writeFile(join(o.out, 'README.md'), exportReadme(m, o.servedAs ?? o.out, draft))
  files.push('README.md')
  return {tensors: tensors.length, bytes, files, draft}
}
