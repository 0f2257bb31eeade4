// The chat page: GET / (webui/index.html) and GET /assets/* (webui/ files and the vendored marked and
// highlight.js). Every file is read once at startup into a fixed table (lib/assets.ts); a path not in the
// table is a 404, so no request reaches a file outside it. The server skips this plugin with --no-webui.
// The routes carry `config.public` so that the page can load before the user has given an API key
// (the page then asks for the key, and every API call carries it).
import type {FastifyInstance, FastifyReply, FastifyRequest} from 'fastify'
import {errors} from '../../src/errors.js'
import {PAGE_CSP, buildAssetTable, notModified, type Asset} from './lib/assets.js'

export default async function webui(app: FastifyInstance): Promise<void> {
  const table = buildAssetTable()

  const send = (request: FastifyRequest, reply: FastifyReply, asset: Asset | undefined) => {
    if (!asset) throw errors.routeNotFound(request.method, request.url)
    reply
      .header('cache-control', 'no-cache')
      .header('etag', asset.etag)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
    if (asset.url === '/') reply.header('content-security-policy', PAGE_CSP).header('x-frame-options', 'DENY')
    if (notModified(request.headers['if-none-match'], asset.etag)) return reply.code(304).send()
    return reply.type(asset.contentType).send(asset.body)
  }

  app.get('/', {config: {public: true}}, async (request, reply) => send(request, reply, table.get('/')))
  app.get<{Params: {'*': string}}>('/assets/*', {config: {public: true}}, async (request, reply) =>
    send(request, reply, table.get(`/assets/${request.params['*']}`)),
  )
}
