// A broken package is refused naming the file, the field or tensor, what was expected and what was found: `splash
// serve` on copies of the default package, each broken the way a package author could, its manifest listing the
// files as they are (so it is not the sha256 check that refuses them).
import t from 'tap'
import {createHash} from 'node:crypto'
import {cp, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {runCli} from '../helpers/cli.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname
let root = ''
t.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'splash-preflight-'))
})
t.teardown(() => rm(root, {recursive: true, force: true}))

type Manifest = {config: Record<string, unknown>; draft: {config: Record<string, unknown>}; files: Array<{path: string; size: number; sha256: string}>}

/** A copy of the default package, broken by `edit` (which may change files and the manifest); the files relisted. */
async function broken(name: string, edit: (dir: string, m: Manifest) => Promise<void>): Promise<string> {
  const dir = join(root, name)
  await cp(DEFAULT, dir, {recursive: true})
  const m = JSON.parse(await readFile(join(dir, 'splash.json'), 'utf8')) as Manifest
  await edit(dir, m)
  for (const f of m.files) {
    const b = await readFile(join(dir, f.path))
    f.size = b.length
    f.sha256 = createHash('sha256').update(b).digest('hex')
  }
  await writeFile(join(dir, 'splash.json'), JSON.stringify(m, null, 2))
  return dir
}

async function refusal(dir: string): Promise<string> {
  const r = await runCli(['serve', '--port', '0', '--model', dir, '--no-webui'], {SPLASH_DATA_DIR: join(root, 'data')})
  t.not(r.code, 0)
  t.notMatch(r.stdout, /Ready/)
  return (r.stderr + r.stdout).split('\n').find(l => l.startsWith('Error:')) ?? ''
}

t.test('a garbled safetensors header: which file, that it is its header, what the JSON parser saw', async t => {
  const dir = await broken('header', async d => {
    const p = join(d, 'model.safetensors')
    const b = await readFile(p)
    b[b.indexOf(':', 8)] = 0x20
    await writeFile(p, b)
  })
  t.match(await refusal(dir), /model\.safetensors: not a valid safetensors file \(its header \(the \d+ bytes after the 8-byte length\) is not JSON: Expected ':' after property name/)
})

t.test('a draft whose hidden_size is not the target\'s: the field, expected and actual', async t => {
  const dir = await broken('draft', async (_d, m) => {
    m.draft.config.hidden_size = 512
  })
  t.match(await refusal(dir), /splash\.json: invalid splash\.json: draft\.config: hidden_size is 512, expected 384 \(config\.hidden_size/)
})

t.test('a tensor whose shape the config does not imply: file, tensor, expected and actual', async t => {
  const dir = await broken('shape', async (_d, m) => {
    m.config.intermediate_size = 1536
  })
  t.match(await refusal(dir), /model\.safetensors: tensor layers\.0\.mlp\.gate_proj\.weight is U32 \[1024, 48\], expected U32 \[1536, 48\] \(a \[1536, 384\] weight/)
})

t.test('a missing tensor: file, tensor and what the config implies', async t => {
  const dir = await broken('missing', async (_d, m) => {
    m.config.num_hidden_layers = 9
    ;(m.config.layer_types as string[]).push('full_attention')
  })
  t.match(await refusal(dir), /model\.safetensors: tensor layers\.8\.input_layernorm is missing \(the model config in splash\.json implies F32 \[384\]/)
})

t.test('a tokenizer that is not one: which file and what it expected', async t => {
  const cut = await broken('tok-json', async d => writeFile(join(d, 'tokenizer.json'), '{"model": {"type": "BPE", "vocab": '))
  t.match(await refusal(cut), /tokenizer\.json: not valid JSON \(.*\); expected a Hugging Face tokenizer file/)
  const wordpiece = await broken('tok-type', async d => {
    const j = JSON.parse(await readFile(join(d, 'tokenizer.json'), 'utf8'))
    j.model.type = 'WordPiece'
    await writeFile(join(d, 'tokenizer.json'), JSON.stringify(j))
  })
  t.match(await refusal(wordpiece), /tokenizer\.json: expected a byte-level BPE tokenizer \(model\.type "BPE" with a model\.vocab object and a model\.merges list\), found model\.type "WordPiece"/)
})
