// GET /v1/models (OpenAI shape). Also claims the OpenAI error envelope for /v1 and for unknown paths.
import type {FastifyInstance} from 'fastify'
import {openaiError} from '../shared/openai-error.js'
import {listModels, retrieveModel} from './lib/models.js'

export default async function openaiModels(app: FastifyInstance): Promise<void> {
  app.errorShapes.register('', openaiError)
  app.errorShapes.register('/v1', openaiError)
  app.get('/v1/models', async () => listModels(app.modelHost))
  app.get<{Params: {'*': string}}>('/v1/models/*', async request => retrieveModel(app.modelHost, request.params['*']))
}
