// GET /metrics in the Prometheus text format (behind the API key when one is set).
import type {FastifyInstance} from 'fastify'

export default async function metrics(app: FastifyInstance): Promise<void> {
  const registry = app.metrics
  registry.gauge('splash_process_resident_memory_bytes', 'Resident memory of the server process', () => process.memoryUsage().rss)
  // where resident memory sits: the JS heap, and memory outside it (native allocations V8 is told of, ArrayBuffers)
  registry.gauge('splash_process_heap_used_bytes', 'Bytes used in the V8 heap', () => process.memoryUsage().heapUsed)
  registry.gauge('splash_process_external_bytes', 'Bytes of C++ objects bound to JS objects, ArrayBuffers included', () => process.memoryUsage().external)
  registry.gauge('splash_process_array_buffers_bytes', 'Bytes of ArrayBuffers and Buffers', () => process.memoryUsage().arrayBuffers)
  registry.gauge('splash_model_ready', '1 once the model is loaded', () => (app.modelHost.ready ? 1 : 0))
  registry.gauge('splash_queue_depth', 'Requests waiting for admission', () => app.modelHost.engine?.scheduler.numWaiting ?? 0)
  registry.gauge('splash_running_requests', 'Requests being generated', () => app.modelHost.engine?.scheduler.numRunning ?? 0)
  const cache = () => app.modelHost.engine?.scheduler.cache?.stats()
  registry.gauge('splash_prefix_cache_bytes', 'Bytes held by the prefix cache (KV blocks and recurrent states)', () => cache()?.bytes ?? 0)
  registry.gauge('splash_prefix_cache_capacity_bytes', 'Bytes the prefix cache may hold', () => cache()?.capacityBytes ?? 0)
  registry.gauge('splash_prefix_cache_snapshots', 'Saved recurrent states in the prefix cache', () => cache()?.snapshots ?? 0)
  registry.gauge('splash_prefix_cache_blocks', 'KV blocks in the prefix cache', () => cache()?.blocks ?? 0)
  registry.gauge('splash_prefix_cache_evictions', 'Snapshots evicted from the prefix cache so far', () => cache()?.evictions ?? 0)
  const disk = () => app.modelHost.engine?.scheduler.cache?.diskStats()
  registry.gauge('splash_prefix_cache_disk_bytes', "Bytes in the prefix cache's disk tier", () => disk()?.bytes ?? 0)
  registry.gauge('splash_prefix_cache_disk_snapshots', "Snapshots in the prefix cache's disk tier", () => disk()?.snapshots ?? 0)
  registry.gauge('splash_prefix_cache_disk_loads', 'Snapshots read back from disk so far', () => disk()?.loads ?? 0)
  app.get('/metrics', async (_request, reply) => {
    reply.type('text/plain; version=0.0.4; charset=utf-8')
    return registry.render()
  })
}
