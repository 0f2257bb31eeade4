// Finds the running Splash server (SPLASH_PORT, default 8000, on 127.0.0.1; SPLASH_API_KEY when it needs a key)
// and asks it which model it serves and with what context window. Every failure is one actionable line.
import {SplashError} from '../errors.js'
import {readOptions} from '../config/options.js'

export interface ServedModelInfo {
  baseUrl: string
  model: string
  contextWindow: number
  packageContextWindow?: number
  reasoningEfforts?: string[]
  reasoningDefault?: string
  vision?: boolean
  apiKey?: string
}

export const DEFAULT_PORT = 8000
const TIMEOUT_MS = 5000

function fail(code: string, message: string): SplashError {
  return new SplashError(code, 'unavailable', message)
}

/** http://127.0.0.1:<SPLASH_PORT or 8000>, or a clear error when SPLASH_PORT is not a port. */
export function serverOrigin(env: NodeJS.ProcessEnv = process.env): string {
  const raw = readOptions(env).agentPort
  if (!raw) return `http://127.0.0.1:${DEFAULT_PORT}`
  const port = /^\d+$/.test(raw) ? Number(raw) : NaN
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new SplashError('invalid_port', 'invalid_request', `SPLASH_PORT must be a port number between 1 and 65535, got "${raw}"`)
  }
  return `http://127.0.0.1:${port}`
}

async function get(url: string, apiKey: string | undefined): Promise<Response> {
  const headers: Record<string, string> = {accept: 'application/json'}
  if (apiKey) headers.authorization = `Bearer ${apiKey}`
  return fetch(url, {headers, signal: AbortSignal.timeout(TIMEOUT_MS)})
}

/** The serve command line that listens where the launcher looks. */
function serveCommand(origin: string): string {
  const port = new URL(origin).port
  return `splash serve --model <package>${port === String(DEFAULT_PORT) ? '' : ` --port ${port}`}`
}

function notRunning(origin: string): SplashError {
  const elsewhere = new URL(origin).port === String(DEFAULT_PORT) ? ' (or set SPLASH_PORT to the port it listens on)' : ''
  return fail(
    'server_not_running',
    `No Splash server is answering on ${origin}: start one in another terminal with \`${serveCommand(origin)}\`${elsewhere}`,
  )
}

/** Why /v1/models listed nothing: still loading, failed, or no package given. */
async function noModel(origin: string, apiKey: string | undefined): Promise<SplashError> {
  let status = 'no_model'
  try {
    const body = (await (await get(`${origin}/ready`, apiKey)).json()) as {status?: string}
    if (typeof body.status === 'string') status = body.status
  } catch {
    // /ready is only a hint for the wording
  }
  if (status === 'loading') {
    return fail('model_loading', `The Splash server on ${origin} is still loading its model; run this again once it is ready`)
  }
  if (status === 'ready') {
    return fail('no_model_listed', `The Splash server on ${origin} lists no model on /v1/models; restart it with \`${serveCommand(origin)}\``)
  }
  return fail(
    'no_model_loaded',
    `The Splash server on ${origin} has no model loaded: restart it with \`${serveCommand(origin)}\``,
  )
}

interface ModelEntry {
  id?: unknown
  context_length?: unknown
  max_model_len?: unknown
  package_context_length?: unknown
  reasoning_efforts?: unknown
  reasoning_effort_default?: unknown
  input_modalities?: unknown
}

/** What else the entry says about the model, each field only when it has the expected shape. */
function extras(entry: ModelEntry): Partial<ServedModelInfo> {
  const out: Partial<ServedModelInfo> = {}
  const pkg = Number(entry.package_context_length)
  if (Number.isInteger(pkg) && pkg > 0) out.packageContextWindow = pkg
  const efforts = entry.reasoning_efforts
  if (Array.isArray(efforts) && efforts.length > 0 && efforts.every(e => typeof e === 'string')) out.reasoningEfforts = efforts as string[]
  if (typeof entry.reasoning_effort_default === 'string') out.reasoningDefault = entry.reasoning_effort_default
  const modalities = entry.input_modalities
  if (Array.isArray(modalities)) out.vision = modalities.includes('image')
  return out
}

/** Asks GET /v1/models on the local server for the served model and its context window. */
export async function discoverServer(env: NodeJS.ProcessEnv = process.env): Promise<ServedModelInfo> {
  const origin = serverOrigin(env)
  const apiKey = readOptions(env).agentApiKey
  let res: Response
  try {
    res = await get(`${origin}/v1/models`, apiKey)
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') {
      throw fail('server_not_answering', `The server on ${origin} did not answer within ${TIMEOUT_MS / 1000} s; is it a Splash server?`)
    }
    throw notRunning(origin)
  }
  if (res.status === 401) {
    throw fail(
      'server_needs_key',
      apiKey
        ? `The Splash server on ${origin} rejected the key in SPLASH_API_KEY; set it to the key the server was started with`
        : `The Splash server on ${origin} requires an API key: set SPLASH_API_KEY to the key it was started with`,
    )
  }
  let body: {object?: unknown; data?: unknown}
  try {
    body = (await res.json()) as typeof body
  } catch {
    body = {}
  }
  if (!res.ok || !Array.isArray(body.data)) {
    throw fail('not_splash', `The server on ${origin} did not answer GET /v1/models like a Splash server (HTTP ${res.status})`)
  }
  const entry = (body.data as ModelEntry[]).find(m => typeof m?.id === 'string' && m.id !== '')
  if (!entry) throw await noModel(origin, apiKey)
  const window = Number(entry.context_length ?? entry.max_model_len)
  if (!Number.isInteger(window) || window <= 0) {
    throw fail('no_context_window', `The server on ${origin} does not report a context window for "${String(entry.id)}"`)
  }
  return {baseUrl: origin, model: entry.id as string, contextWindow: window, ...extras(entry), apiKey}
}
