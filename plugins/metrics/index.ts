// GET /metrics in the Prometheus text format (behind the API key when one is set).
import type {FastifyInstance} from 'fastify'

export default async function metrics(app: FastifyInstance): Promise<void> {
  const registry = app.metrics
  registry.gauge('splash_process_resident_memory_bytes', 'Resident memory of the server process', () => process.memoryUsage().rss)
  registry.gauge('splash_model_ready', '1 once the model is loaded', () => (app.modelHost.ready ? 1 : 0))
  registry.gauge('splash_queue_depth', 'Requests waiting for admission', () => app.modelHost.engine?.scheduler.numWaiting ?? 0)
  registry.gauge('splash_running_requests', 'Requests being generated', () => app.modelHost.engine?.scheduler.numRunning ?? 0)
  app.get('/metrics', async (_request, reply) => {
    reply.type('text/plain; version=0.0.4; charset=utf-8')
    return registry.render()
  })
}
