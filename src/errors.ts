// The one error taxonomy of Splash. Every failure that reaches a client or the command line is a
// SplashError with a stable code; each API surface maps `kind` to its own envelope and wording.

export type ErrorKind =
  | 'invalid_request' // 400: the request is malformed or asks for something impossible
  | 'authentication' // 401: missing or wrong API key
  | 'permission' // 403: host not allowed
  | 'not_found' // 404: unknown route, model or object
  | 'request_too_large' // 413: body over the limit
  | 'unsupported_media_type' // 415: a body that is not JSON, or in a charset that cannot be read
  | 'overloaded' // 503 with Retry-After: the queue is full
  | 'unavailable' // 503: not ready (model loading)
  | 'internal' // 500: a bug; the message is generic

const STATUS: Record<ErrorKind, number> = {
  invalid_request: 400,
  authentication: 401,
  permission: 403,
  not_found: 404,
  request_too_large: 413,
  unsupported_media_type: 415,
  overloaded: 503,
  unavailable: 503,
  internal: 500,
}

export interface SplashErrorOptions {
  /** The request field the error is about, e.g. "messages[2].content". */
  param?: string
  /** Seconds a client should wait before retrying (overloaded). */
  retryAfter?: number
  cause?: unknown
}

export class SplashError extends Error {
  readonly code: string
  readonly kind: ErrorKind
  readonly status: number
  readonly param?: string
  readonly retryAfter?: number

  constructor(code: string, kind: ErrorKind, message: string, options: SplashErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : {cause: options.cause})
    this.name = 'SplashError'
    this.code = code
    this.kind = kind
    this.status = STATUS[kind]
    this.param = options.param
    this.retryAfter = options.retryAfter
  }
}

// Constructors for the conditions that more than one layer raises. Codes are lower_snake, as OpenAI's are.
export const errors = {
  invalidRequest: (message: string, param?: string, code = 'invalid_request') =>
    new SplashError(code, 'invalid_request', message, {param}),
  contextLengthExceeded: (promptTokens: number, limit: number) =>
    new SplashError(
      'context_length_exceeded',
      'invalid_request',
      `prompt is too long: ${promptTokens} tokens > ${limit} maximum`,
      {param: 'messages'},
    ),
  missingApiKey: () => new SplashError('invalid_api_key', 'authentication', 'Missing API key'),
  wrongApiKey: () => new SplashError('invalid_api_key', 'authentication', 'Invalid API key'),
  hostNotAllowed: (host: string) =>
    new SplashError(
      'host_not_allowed',
      'permission',
      `Host "${host}" is not allowed; start splash serve with --allowed-host ${host} to permit it`,
    ),
  routeNotFound: (method: string, url: string) =>
    new SplashError('not_found', 'not_found', `No route for ${method} ${url.split('?')[0]}`),
  modelNotFound: (model: string, served: string | undefined) =>
    new SplashError(
      'model_not_found',
      'not_found',
      served ? `The model "${model}" does not exist; this server serves "${served}"` : `The model "${model}" does not exist; no model is loaded`,
      {param: 'model'},
    ),
  notReady: () => new SplashError('model_not_ready', 'unavailable', 'The model is not loaded yet'),
  shuttingDown: () => new SplashError('shutting_down', 'unavailable', 'The server is shutting down; requests in flight finish, new ones are refused'),
  overloaded: (retryAfter: number) =>
    new SplashError('overloaded', 'overloaded', 'The server is busy; retry shortly', {retryAfter}),
  internal: (cause?: unknown) =>
    new SplashError('internal_error', 'internal', 'The server had an internal error', {cause}),
}
