// OpenAI's error envelope: {"error": {"message", "type", "param", "code"}}.
import type {SplashError} from '../../src/errors.js'
import type {ErrorEnvelope} from '../../src/server/error-shapes.js'

const TYPES: Record<SplashError['kind'], string> = {
  invalid_request: 'invalid_request_error',
  authentication: 'invalid_request_error',
  permission: 'permission_error',
  not_found: 'invalid_request_error',
  request_too_large: 'invalid_request_error',
  unsupported_media_type: 'invalid_request_error',
  overloaded: 'server_error',
  unavailable: 'server_error',
  internal: 'server_error',
}

export function openaiErrorBody(err: SplashError): {error: {message: string; type: string; param: string | null; code: string | null}} {
  return {error: {message: err.message, type: TYPES[err.kind], param: err.param ?? null, code: err.code}}
}

export function openaiError(err: SplashError): ErrorEnvelope {
  return {body: openaiErrorBody(err)}
}
