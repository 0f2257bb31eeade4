// The real `splash serve` with a real (tiny, synthetic) model package, for launcher tests that need a served
// model: the package comes from `splash package synth --preset tiny-hybrid`.
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {runCli, startServe, type ServerProcess} from '../helpers/cli.js'

export interface ServedModel {
  server: ServerProcess
  model: string
  contextWindow: number
  apiKey?: string
  stop(): void
}

/** The stop list of a terse package: its own stops, the tool-call opener and every fourth ordinary token. */
function terseStops(tokenizerFile: string, stops: number[], vocab: number): number[] {
  const tok = JSON.parse(readFileSync(tokenizerFile, 'utf8')) as {added_tokens: Array<{id: number; content: string}>}
  const special = new Set(tok.added_tokens.map(a => a.id))
  const opener = tok.added_tokens.find(a => a.content === '<tool_call>')
  if (!opener) throw new Error(`${tokenizerFile} has no <tool_call> token`)
  const ordinary = Array.from({length: vocab}, (_, id) => id).filter(id => id % 4 === 1 && !special.has(id))
  return [...new Set([...stops, opener.id, ...ordinary])]
}

/** Waits until /ready says the model is loaded (the server may print Ready before loading finishes). */
async function waitReady(server: ServerProcess, timeoutMs = 300_000): Promise<void> {
  const end = Date.now() + timeoutMs
  for (;;) {
    const res = await fetch(`${server.url}/ready`)
    if (res.ok) return
    const body = (await res.json()) as {status?: string; error?: string}
    if (body.status === 'failed' || body.status === 'no_model' || server.child.exitCode !== null || Date.now() > end) {
      server.child.kill('SIGKILL')
      throw new Error(`the model did not load (${JSON.stringify(body)}):\n${server.output()}`)
    }
    await new Promise(r => setTimeout(r, 200))
  }
}

/**
 * Builds the tiny synthetic package and serves it with a 64K window (every agent's floor is met). `terse`: the
 * package's stop list also takes every fourth ordinary token and the tool-call opener, so the random model's answers
 * end after a few tokens and never open a tool call (for real agents, which otherwise may call tools turn after turn).
 */
export async function serveTinyModel(opts: {apiKey?: string; maxContext?: string; terse?: boolean} = {}): Promise<ServedModel> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'splash-agent-model-'))
  const pkg = path.join(dir, 'tiny-hybrid')
  const synth = await runCli(['package', 'synth', '--preset', 'tiny-hybrid', '--out', pkg], {}, 300_000)
  if (synth.code !== 0) {
    rmSync(dir, {recursive: true, force: true})
    throw new Error(`splash package synth --preset tiny-hybrid failed (${synth.code}):\n${synth.stdout}${synth.stderr}`)
  }
  // tiny-hybrid declares 4K positions; agents need more room than that (Claude Code's own prompt is ~20K tokens,
  // Hermes refuses under 64K). splash.json is not among the hashed files, so the fixture may declare a longer
  // range; random weights do not care how far RoPE goes.
  const manifestPath = path.join(pkg, 'splash.json')
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as {
    config: {max_position_embeddings: number; vocab_size: number}
    tokenizer: {file: string; eos_token_ids: number[]}
  }
  manifest.config.max_position_embeddings = Math.max(manifest.config.max_position_embeddings, 262144)
  if (opts.terse) manifest.tokenizer.eos_token_ids = terseStops(path.join(pkg, manifest.tokenizer.file), manifest.tokenizer.eos_token_ids, manifest.config.vocab_size)
  writeFileSync(manifestPath, JSON.stringify(manifest, null, 2))
  const args = ['--model', pkg, '--max-context', opts.maxContext ?? '64K']
  if (opts.apiKey) args.push('--api-key', opts.apiKey)
  const server = await startServe(args, {SPLASH_API_KEY: ''})
  const headers: Record<string, string> = opts.apiKey ? {authorization: `Bearer ${opts.apiKey}`} : {}
  await waitReady(server)
  const list = (await (await fetch(`${server.url}/v1/models`, {headers})).json()) as {data: Array<{id: string; context_length: number}>}
  const entry = list.data[0]
  if (!entry) throw new Error(`the server lists no model:\n${server.output()}`)
  return {
    server,
    model: entry.id,
    contextWindow: entry.context_length,
    apiKey: opts.apiKey,
    stop() {
      server.child.kill('SIGKILL')
      rmSync(dir, {recursive: true, force: true})
    },
  }
}
