// Anthropic Messages surface. Every path under /v1/messages answers errors in Anthropic's envelope.
import type {FastifyInstance} from 'fastify'
import {anthropicError} from '../shared/anthropic-error.js'

export default async function anthropicMessages(app: FastifyInstance): Promise<void> {
  app.errorShapes.register('/v1/messages', anthropicError)
}
