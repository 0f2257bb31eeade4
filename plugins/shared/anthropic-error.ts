// Anthropic's error envelope: {"type": "error", "error": {"type", "message"}}, with Anthropic's status codes.
import {randomUUID} from 'node:crypto'
import type {SplashError} from '../../src/errors.js'
import type {ErrorEnvelope} from '../../src/server/error-shapes.js'

const TYPES: Record<SplashError['kind'], string> = {
  invalid_request: 'invalid_request_error',
  authentication: 'authentication_error',
  permission: 'permission_error',
  not_found: 'not_found_error',
  request_too_large: 'request_too_large',
  unsupported_media_type: 'invalid_request_error',
  overloaded: 'overloaded_error',
  unavailable: 'api_error',
  internal: 'api_error',
}

export function anthropicError(err: SplashError): ErrorEnvelope {
  const requestId = `req_${randomUUID().replace(/-/g, '')}`
  return {
    body: {type: 'error', error: {type: TYPES[err.kind], message: err.message}, request_id: requestId},
    headers: {'request-id': requestId},
    status: err.kind === 'overloaded' ? 529 : undefined,
  }
}
