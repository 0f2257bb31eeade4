// The tokenizer and chat template of a package, taken from a checkpoint folder: tokenizer.json as is; the template
// from tokenizer_config.json (chat_template, a string or a list of named templates), chat_template.jinja or
// chat_template.json; end-of-sequence ids from generation_config.json / config.json, else from tokenizer_config.json.
import {copyFile, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {SplashError} from '../../errors.js'
import type {Checkpoint, RawConfig} from './checkpoint.js'
import type {Manifest} from '../manifest.js'

export const TOKENIZER_FILE = 'tokenizer.json'
export const TEMPLATE_FILE = 'chat_template.jinja'

async function readText(path: string): Promise<string | undefined> {
  return readFile(path, 'utf8').catch(() => undefined)
}

function templateFrom(value: unknown): string | undefined {
  if (typeof value === 'string') return value
  if (Array.isArray(value)) {
    const list = value as {name?: string; template?: string}[]
    return (list.find(t => t.name === 'default') ?? list[0])?.template
  }
  return undefined
}

const ids = (v: unknown): number[] => (typeof v === 'number' ? [v] : Array.isArray(v) ? v.filter(x => typeof x === 'number') : [])

function tokenText(v: unknown): string | undefined {
  if (typeof v === 'string') return v
  if (v && typeof v === 'object' && typeof (v as {content?: unknown}).content === 'string') return (v as {content: string}).content
  return undefined
}

/** Copies the tokenizer and writes the chat template into `out`; returns the manifest's tokenizer section. */
export async function copyTokenizer(ck: Checkpoint, out: string): Promise<Manifest['tokenizer']> {
  const tokJson = await readText(join(ck.dir, TOKENIZER_FILE))
  if (tokJson === undefined) {
    throw new SplashError('invalid_checkpoint', 'invalid_request', `${ck.dir}: no tokenizer.json (a package needs the fast tokenizer file)`)
  }
  const tc = (await ck.json('tokenizer_config.json')) ?? {}
  const template =
    templateFrom(tc.chat_template) ??
    (await readText(join(ck.dir, 'chat_template.jinja'))) ??
    templateFrom(((await ck.json('chat_template.json')) ?? {}).chat_template)
  if (!template) {
    throw new SplashError('invalid_checkpoint', 'invalid_request', `${ck.dir}: no chat template (tokenizer_config.json chat_template or chat_template.jinja)`)
  }
  await copyFile(join(ck.dir, TOKENIZER_FILE), join(out, TOKENIZER_FILE))
  await writeFile(join(out, TEMPLATE_FILE), template)

  const tok = JSON.parse(tokJson) as {added_tokens?: {id: number; content: string}[]; model?: {vocab?: Record<string, number>}}
  const idOf = (text: string | undefined) =>
    text === undefined ? undefined : (tok.added_tokens?.find(t => t.content === text)?.id ?? tok.model?.vocab?.[text])
  const gen = (await ck.json('generation_config.json')) ?? {}
  const text = (ck.config.text_config ?? {}) as RawConfig
  const eos = new Set([...ids(gen.eos_token_id), ...ids(ck.config.eos_token_id), ...ids(text.eos_token_id)])
  const fromTc = idOf(tokenText(tc.eos_token))
  if (fromTc !== undefined) eos.add(fromTc)
  if (eos.size === 0) {
    throw new SplashError('invalid_checkpoint', 'invalid_request', `${ck.dir}: no eos_token_id in generation_config.json, config.json or tokenizer_config.json`)
  }
  const pad = idOf(tokenText(tc.pad_token)) ?? (typeof gen.pad_token_id === 'number' ? gen.pad_token_id : null)
  return {file: TOKENIZER_FILE, chat_template: TEMPLATE_FILE, eos_token_ids: [...eos], pad_token_id: pad}
}

/**
 * The sampling defaults a checkpoint's generation_config.json declares, as vLLM reads them: only the fields it
 * sets; `do_sample: false` means greedy (Hugging Face's reading). Absent file or no such field: undefined.
 */
export async function samplingDefaults(ck: Checkpoint): Promise<Manifest['sampling']> {
  const gen = (await ck.json('generation_config.json')) as Record<string, unknown> | undefined
  if (!gen) return undefined
  if (gen.do_sample === false) return {temperature: 0}
  const out: NonNullable<Manifest['sampling']> = {}
  for (const key of ['temperature', 'top_p', 'top_k', 'min_p', 'repetition_penalty'] as const) {
    if (typeof gen[key] === 'number') out[key] = gen[key]
  }
  return Object.keys(out).length > 0 ? out : undefined
}
