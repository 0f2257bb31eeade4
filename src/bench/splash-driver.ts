// The Splash side of the bench: `splash serve --port 0 --model <pkg>` as a child process, driven over HTTP with
// streaming chat completions as any client would.
import {spawn, type ChildProcess} from 'node:child_process'
import {fileURLToPath} from 'node:url'
import path from 'node:path'
import {SplashError} from '../errors.js'
import type {ChatResult, Driver, Message} from './driver.js'

const binPath = fileURLToPath(new URL('../../' + (import.meta.url.includes('/dist/') ? '../' : '') + 'bin/run.js', import.meta.url))

export interface SplashServer {
  url: string
  child: ChildProcess
  output: () => string
  stop: () => Promise<void>
}

export function startSplash(model: string, extra: string[] = [], timeoutMs = 180_000, env: NodeJS.ProcessEnv = {}): Promise<SplashServer> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [binPath, 'serve', '--port', '0', '--model', model, '--no-webui', ...extra], {
      stdio: ['ignore', 'pipe', 'pipe'],
      // no disk tier for the prefix cache: an earlier run's snapshots would turn the uncached scenarios into hits
      env: {...process.env, SPLASH_PREFIX_DISK: 'off', ...env},
    })
    let out = ''
    let ready = false
    const exited = new Promise<void>(r => child.on('exit', () => r()))
    const stop = async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM')
        const t = setTimeout(() => child.kill('SIGKILL'), 5000)
        await exited
        clearTimeout(t)
      }
    }
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new SplashError('bench_server', 'unavailable', `splash serve did not become ready in ${timeoutMs / 1000} s: ${out.trim().split('\n').pop() ?? ''}`))
    }, timeoutMs)
    const onData = (d: Buffer) => {
      out += d.toString()
      const m = /Ready: (http:\/\/[\w.:[\]]+)/.exec(out)
      if (m && !ready) {
        ready = true
        clearTimeout(timer)
        resolve({url: m[1], child, output: () => out, stop})
      }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    child.on('exit', code => {
      clearTimeout(timer)
      if (!ready) reject(new SplashError('bench_server', 'unavailable', `splash serve exited with ${code}: ${out.trim().split('\n').pop() ?? ''}`))
    })
  })
}

async function postJson(url: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(url, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify(body)})
  const json = (await res.json()) as Record<string, unknown>
  if (!res.ok) throw new SplashError('bench_http', 'internal', `${url}: HTTP ${res.status} ${JSON.stringify(json).slice(0, 200)}`)
  return json
}

export interface SplashDriverOptions {
  reasoningEffort: string
  seed: number
  temperature: number
}

export class SplashDriver implements Driver {
  label = 'Splash'
  contextLength = 0
  modelId = ''
  /** What the server says it runs on (its /metrics splash_model_info), e.g. "cuda (sm_90)". */
  backend = ''
  private constructor(readonly server: SplashServer, private readonly o: SplashDriverOptions) {}

  static async start(model: string, o: SplashDriverOptions, extra: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<SplashDriver> {
    const server = await startSplash(model, extra, undefined, env)
    const d = new SplashDriver(server, o)
    const models = (await (await fetch(`${server.url}/v1/models`)).json()) as {data: {id: string; context_length: number}[]}
    d.modelId = models.data[0]?.id ?? ''
    d.contextLength = models.data[0]?.context_length ?? 0
    const metrics = await (await fetch(`${server.url}/metrics`)).text()
    const info = /^splash_model_info\{(.*)\} 1$/m.exec(metrics)?.[1] ?? ''
    const label = (k: string) => new RegExp(`(?:^|,)${k}="([^"]*)"`).exec(info)?.[1]
    d.backend = label('backend') ? `${label('backend')} (${label('variant')})` : 'unknown'
    return d
  }

  /** Tokens the server's draft has proposed so far (its /metrics splash_spec_draft_tokens_total; 0 without a draft). */
  async draftedTokens(): Promise<number> {
    const metrics = await (await fetch(`${this.server.url}/metrics`)).text()
    return Number(/^splash_spec_draft_tokens_total (\S+)$/m.exec(metrics)?.[1] ?? 0)
  }

  async countTokens(messages: Message[]): Promise<number> {
    const r = await postJson(`${this.server.url}/tokenize`, {messages, reasoning_effort: this.o.reasoningEffort})
    return Number(r.count)
  }

  /** The prompt text exactly as the model sees it (for the peer, which must get the same tokens). */
  async render(messages: Message[]): Promise<string> {
    const r = await postJson(`${this.server.url}/apply-template`, {messages, reasoning_effort: this.o.reasoningEffort})
    return String(r.prompt)
  }

  async chat(messages: Message[], maxTokens: number): Promise<ChatResult> {
    const t0 = performance.now()
    const res = await fetch(`${this.server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {'content-type': 'application/json'},
      body: JSON.stringify({
        model: this.modelId,
        messages,
        max_tokens: maxTokens,
        // A fixed output length: every request generates exactly max_tokens (synthetic weights hit EOS at random).
        ignore_eos: true,
        temperature: this.o.temperature,
        seed: this.o.seed,
        reasoning_effort: this.o.reasoningEffort,
        stream: true,
        stream_options: {include_usage: true},
      }),
    })
    if (!res.ok || !res.body) throw new SplashError('bench_http', 'internal', `chat completions: HTTP ${res.status} ${(await res.text()).slice(0, 200)}`)
    let firstAt = 0
    let lastAt = 0
    let usage: {prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: {cached_tokens?: number}} = {}
    let timings: Record<string, number> = {}
    let buf = ''
    const decoder = new TextDecoder()
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, {stream: true})
      let i: number
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, i)
        buf = buf.slice(i + 2)
        for (const line of event.split('\n')) {
          if (!line.startsWith('data:')) continue
          const data = line.slice(5).trim()
          if (data === '[DONE]') continue
          const j = JSON.parse(data) as {choices?: {delta?: {content?: string; reasoning_content?: string}}[]; usage?: typeof usage; timings?: Record<string, number>; error?: {message?: string}}
          if (j.error) throw new SplashError('bench_http', 'internal', `chat completions stream error: ${j.error.message}`)
          const d = j.choices?.[0]?.delta
          if (d && (d.content || d.reasoning_content)) {
            const now = performance.now()
            if (!firstAt) firstAt = now
            lastAt = now
          }
          if (j.usage) usage = j.usage
          if (j.timings) timings = j.timings
        }
      }
    }
    const end = performance.now()
    if (!firstAt) firstAt = lastAt = end
    const completionTokens = usage.completion_tokens ?? 0
    const decodeMs = lastAt - firstAt
    return {
      ttftMs: firstAt - t0,
      totalMs: end - t0,
      promptTokens: usage.prompt_tokens ?? timings.prompt_n ?? 0,
      cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? timings.cache_n ?? 0,
      promptMs: timings.prompt_ms ?? firstAt - t0,
      completionTokens,
      decodeMs,
      decodeTps: completionTokens > 1 && decodeMs > 0 ? ((completionTokens - 1) / decodeMs) * 1000 : NaN,
      raw: timings,
      firstAt,
      lastAt,
    }
  }

  async close(): Promise<void> {
    await this.server.stop()
  }
}

export const splashBin = path.resolve(binPath)
