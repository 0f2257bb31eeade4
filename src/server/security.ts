// Request admission before any route runs: the Host allowlist (against DNS rebinding) for every
// request, probes included, and the API key for everything but the probes.
import fp from 'fastify-plugin'
import {timingSafeEqual, createHash} from 'node:crypto'
import type {FastifyInstance, FastifyRequest} from 'fastify'
import {errors} from '../errors.js'

export interface SecurityOptions {
  apiKey?: string
  allowedHosts?: string[]
}

const PUBLIC_PATHS = new Set(['/health', '/ready'])

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Served without the API key (probes, the chat page's own static files). The Host check still applies. */
    public?: boolean
  }
}
const LOOPBACK_NAMES = new Set(['127.0.0.1', 'localhost', '[::1]'])

/** The host name of a Host header without its port: "localhost:8000" → "localhost", "[::1]:80" → "[::1]". */
export function hostName(header: string): string {
  const h = header.trim().toLowerCase()
  if (h.startsWith('[')) {
    const end = h.indexOf(']')
    return end === -1 ? h : h.slice(0, end + 1)
  }
  const colon = h.indexOf(':')
  return colon === -1 ? h : h.slice(0, colon)
}

export function isHostAllowed(header: string | undefined, allowed: ReadonlySet<string>): boolean {
  if (!header) return false
  const name = hostName(header)
  return LOOPBACK_NAMES.has(name) || allowed.has(name)
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest()
}

/** Constant-time key comparison: both sides are hashed to a fixed length first. */
export function keyMatches(given: string, expected: Buffer): boolean {
  return timingSafeEqual(digest(given), expected)
}

export function presentedKey(request: FastifyRequest): string | undefined {
  const auth = request.headers.authorization
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(.+)$/i.exec(auth.trim())
    if (m) return m[1].trim()
  }
  const x = request.headers['x-api-key']
  if (typeof x === 'string' && x.length > 0) return x.trim()
  return undefined
}

async function securityPlugin(app: FastifyInstance, opts: SecurityOptions): Promise<void> {
  const allowed = new Set((opts.allowedHosts ?? []).map(h => hostName(h)))
  const expected = opts.apiKey ? digest(opts.apiKey) : undefined

  app.addHook('onRequest', async request => {
    if (!isHostAllowed(request.headers.host, allowed)) throw errors.hostNotAllowed(request.headers.host ?? '')
    if (!expected) return
    const path = request.url.split('?')[0]
    if (PUBLIC_PATHS.has(path) || request.routeOptions.config?.public === true) return
    const key = presentedKey(request)
    if (key === undefined) throw errors.missingApiKey()
    if (!keyMatches(key, expected)) throw errors.wrongApiKey()
  })
}

export default fp(securityPlugin, {name: 'splash-security', fastify: '5.x', dependencies: ['splash-error-shapes']})
