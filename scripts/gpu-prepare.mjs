#!/usr/bin/env node
// Prepares a GPU run: copies the native sources, the GPU scripts and tools into OUT, and builds the
// reference fixtures (test/fixtures/reference) into packages under OUT/fixtures, as parity.test.ts does
// (the GPU machine has no Node). Needs `npm run build` first. Usage: node scripts/gpu-prepare.mjs OUT
import {cp, mkdir, mkdtemp, readdir, rm, writeFile} from 'node:fs/promises'
import {existsSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const out = path.resolve(process.argv[2] ?? '.gpu')
const {buildPackage} = await import(path.join(root, 'dist/src/package/builder/builder.js'))
const {makeTokenizer, SYNTH_CHAT_TEMPLATE} = await import(path.join(root, 'dist/src/package/synth/synth-tokenizer.js'))
const {synthPackage} = await import(path.join(root, 'dist/src/package/synth/synth.js'))

await rm(out, {recursive: true, force: true})
await mkdir(out, {recursive: true})
const skip = (src) => !/\/(build|build-[^/]*|node_modules)(\/|$)/.test(src)
await cp(path.join(root, 'core-native'), path.join(out, 'core-native'), {recursive: true, filter: skip})
await cp(path.join(root, 'scripts/gpu-test.sh'), path.join(out, 'scripts/gpu-test.sh'))
await cp(path.join(root, 'tools/bench'), path.join(out, 'tools/bench'), {recursive: true})
await cp(path.join(root, 'tools/build_spec_kernels.py'), path.join(out, 'tools/build_spec_kernels.py'))

const fixtures = path.join(root, 'test/fixtures/reference')
const work = await mkdtemp(path.join(tmpdir(), 'splash-gpu-'))
for (const variant of (await readdir(fixtures, {withFileTypes: true})).filter(d => d.isDirectory()).map(d => d.name)) {
  const ck = path.join(work, variant)
  await cp(path.join(fixtures, variant), ck, {recursive: true})
  const tok = makeTokenizer(300)
  await writeFile(path.join(ck, 'tokenizer.json'), tok.json)
  await writeFile(path.join(ck, 'tokenizer_config.json'), JSON.stringify({chat_template: SYNTH_CHAT_TEMPLATE, eos_token: '<|im_end|>'}))
  await writeFile(path.join(ck, 'generation_config.json'), JSON.stringify({eos_token_id: [tok.specials['<|im_end|>']]}))
  const quant = variant.endsWith('mlx4') ? 'q4' : 'bf16'
  await buildPackage({checkpoint: ck, out: path.join(out, 'fixtures', variant), quant})
  // a q4 and a q8 build of one fixture exercise the quantised GEMVs end to end
  if (variant === 'qwen3_5_moe' || variant === 'qwen3_5-dense')
    for (const q of ['q4', 'q8']) await buildPackage({checkpoint: ck, out: path.join(out, 'fixtures', `${variant}-${q}`), quant: q})
}
await rm(work, {recursive: true, force: true})
// a DFlash 2 draft (conv, candidate selector, a sliding window shorter than the block): its draft logits on CUDA
// against the CPU (the conv taps and the selector's walk run on the host on both)
await synthPackage({preset: 'tiny-hybrid', quant: 'q4', seed: 7, draft: 'dflash2', draftWindow: 12, out: path.join(out, 'fixtures', 'tiny-hybrid-dflash2')})
console.log('prepared', out, existsSync(path.join(out, 'fixtures')) ? '(with fixtures)' : '')
