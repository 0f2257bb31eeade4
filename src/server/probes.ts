// Liveness and readiness. Both are public even with an API key; both are subject to the Host check.
import type {FastifyInstance} from 'fastify'

export default async function probes(app: FastifyInstance): Promise<void> {
  app.get('/health', async () => ({status: 'ok'}))
  app.get('/ready', async (_request, reply) => {
    const host = app.modelHost
    if (host.ready) return {status: 'ready', model: host.model?.id}
    reply.code(503)
    return {status: host.status === 'none' ? 'no_model' : host.status, ...(host.failure ? {error: host.failure} : {})}
  })
}
