// Maps every error to the envelope of the API that was called. API plugins register a formatter for
// their URL prefix; the longest matching prefix wins. Nothing here knows what the envelopes look like.
import fp from 'fastify-plugin'
import type {FastifyError, FastifyInstance, FastifyReply, FastifyRequest} from 'fastify'
import {SplashError, errors} from '../errors.js'
import {BODY_LIMIT_BYTES} from './body.js'

export interface ErrorEnvelope {
  body: unknown
  headers?: Record<string, string>
  /** Overrides the HTTP status where an API uses its own (Anthropic's 529 for overloaded). */
  status?: number
}
export type ErrorFormatter = (err: SplashError, request: FastifyRequest) => ErrorEnvelope

export class ErrorShapes {
  private readonly formatters: Array<{prefix: string; format: ErrorFormatter}> = []

  register(prefix: string, format: ErrorFormatter): void {
    this.formatters.push({prefix, format})
    this.formatters.sort((a, b) => b.prefix.length - a.prefix.length)
  }

  formatterFor(url: string): ErrorFormatter {
    const path = url.split('?')[0]
    const hit = this.formatters.find(f => path === f.prefix || path.startsWith(f.prefix.endsWith('/') ? f.prefix : f.prefix + '/') || f.prefix === '')
    return hit ? hit.format : plainFormatter
  }
}

const plainFormatter: ErrorFormatter = err => ({body: {error: {message: err.message, code: err.code}}})

/** Turns anything thrown inside a request into a SplashError, without leaking internals. */
export function toSplashError(err: unknown): SplashError {
  if (err instanceof SplashError) return err
  const fe = err as Partial<FastifyError> & {validation?: unknown}
  if (fe && typeof fe === 'object' && typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    if (fe.statusCode === 413) return new SplashError('request_too_large', 'request_too_large', `Request body is too large (at most ${BODY_LIMIT_BYTES / 2 ** 20} MiB)`)
    if (fe.statusCode === 415) return new SplashError('unsupported_media_type', 'unsupported_media_type', 'Unsupported Content-Type: send the body as JSON with the header Content-Type: application/json')
    if (fe.statusCode === 404) return new SplashError('not_found', 'not_found', fe.message ?? 'Not found')
    const message = fe.validation ? `Invalid request: ${fe.message}` : (fe.message ?? 'Invalid request')
    const param = fe.validation ? validationParam(fe.validation) : undefined
    return new SplashError('invalid_request', 'invalid_request', message, {param})
  }
  return errors.internal(err)
}

function validationParam(validation: unknown): string | undefined {
  const first = Array.isArray(validation) ? (validation[0] as {instancePath?: string}) : undefined
  const path = first?.instancePath?.replace(/^\//, '').replace(/\//g, '.')
  return path || undefined
}

/**
 * Logs a 5xx (at error level, so the default log level shows it) with the request id and its cause, and counts it
 * by route in splash_server_errors_total; 4xx answers are the client's business and stay out of the log.
 */
export function reportServerError(request: FastifyRequest, se: SplashError, err: unknown): void {
  if (se.status < 500) return
  const route = request.routeOptions?.url ?? 'unmatched'
  const cause = se.kind === 'internal' ? (se.cause ?? err) : undefined
  request.log.error({route, status: se.status, code: se.code, ...(cause ? {err: cause} : {})}, `${se.status} ${se.code}: ${se.message}`)
  request.server.metrics?.serverErrors.inc(1, {route, code: se.code})
}

/** The SplashError a stream that already answered 200 reports in its last event, logged and counted like a 5xx. */
export function streamFailure(request: FastifyRequest, err: unknown): SplashError {
  const se = toSplashError(err)
  reportServerError(request, se, err)
  return se
}

export function sendError(reply: FastifyReply, request: FastifyRequest, shapes: ErrorShapes, err: unknown): FastifyReply {
  const se = toSplashError(err)
  reportServerError(request, se, err)
  const {body, headers, status} = shapes.formatterFor(request.url)(se, request)
  if (se.retryAfter !== undefined) reply.header('retry-after', String(se.retryAfter))
  if (headers) reply.headers(headers)
  return reply.code(status ?? se.status).type('application/json').send(body)
}

declare module 'fastify' {
  interface FastifyInstance {
    errorShapes: ErrorShapes
  }
}

async function errorShapesPlugin(app: FastifyInstance): Promise<void> {
  app.decorate('errorShapes', new ErrorShapes())
  app.setErrorHandler((err, request, reply) => sendError(reply, request, app.errorShapes, err))
  // Once close() starts, new requests (on connections still open) get a 503 in the API's shape, logged like every 5xx.
  let closing = false
  app.addHook('preClose', async () => {
    closing = true
  })
  app.addHook('onRequest', async () => {
    if (closing) throw errors.shuttingDown()
  })
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, request, app.errorShapes, errors.routeNotFound(request.method, request.url)),
  )
}

export default fp(errorShapesPlugin, {name: 'splash-error-shapes', fastify: '5.x'})
