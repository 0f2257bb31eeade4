// Assembles the Fastify app: shared services first (error shapes, security, model host), then every
// API surface found in plugins/. Listening and signals are serve.ts's business.
import Fastify, {type FastifyInstance} from 'fastify'
import {readOptions} from '../config/options.js'
import fp from 'fastify-plugin'
import errorShapes from './error-shapes.js'
import body, {BODY_LIMIT_BYTES} from './body.js'
import security from './security.js'
import probes from './probes.js'
import {loadFolderPlugins} from './plugin-loader.js'
import {ModelHost} from '../serving/model-host.js'
import {Metrics} from '../engine/metrics.js'

export interface AppOptions {
  apiKey?: string
  allowedHosts?: string[]
  webui?: boolean
  maxImagePixels?: number
  /** Fetch http(s) image URLs named in requests (off by default: only inline images are accepted). */
  allowImageUrls?: boolean
  /** Already-created model host (the loader fills it in). */
  modelHost?: ModelHost
  metrics?: Metrics
  /** false: no log at all (tests of the app alone); otherwise errors go to stdout, more with SPLASH_LOG_LEVEL. */
  logger?: boolean
  /** Where the log goes (default stdout). */
  logStream?: {write(line: string): void}
}

declare module 'fastify' {
  interface FastifyInstance {
    modelHost: ModelHost
    appOptions: AppOptions
    metrics: Metrics
  }
}

const hostPlugin = fp(
  async (app: FastifyInstance, opts: {host: ModelHost; options: AppOptions}) => {
    app.decorate('modelHost', opts.host)
    app.decorate('appOptions', opts.options)
    app.decorate('metrics', opts.options.metrics ?? new Metrics())
    app.addHook('onResponse', async (request, reply) => {
      const route = request.routeOptions.url ?? 'unmatched'
      app.metrics.requests.inc(1, {route, status: String(reply.statusCode)})
    })
  },
  {name: 'splash-model-host', fastify: '5.x'},
)

export async function buildApp(options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    // Error level by default: every 5xx is logged (error-shapes.ts) while ordinary requests stay out of the log.
    logger: options.logger === false ? false : {level: readOptions().logLevel ?? 'error', ...(options.logStream ? {stream: options.logStream} : {})},
    // Idle keep-alive sockets are closed at shutdown; requests in flight are allowed to finish.
    forceCloseConnections: 'idle',
    bodyLimit: BODY_LIMIT_BYTES,
    // No type coercion: a union such as "string or token ids" must see the value as sent.
    ajv: {customOptions: {coerceTypes: false, removeAdditional: false}},
    // Off: a request that arrives while the server closes gets our 503 (error-shapes.ts), logged and counted.
    return503OnClosing: false,
  })
  await app.register(errorShapes)
  await app.register(body)
  await app.register(security, {apiKey: options.apiKey, allowedHosts: options.allowedHosts})
  await app.register(hostPlugin, {host: options.modelHost ?? new ModelHost(), options})
  await app.register(probes)
  for (const {name, plugin} of await loadFolderPlugins('plugins')) {
    if (name === 'webui' && options.webui === false) continue
    await app.register(plugin, {})
  }
  return app
}
