// Runs the server: listen on loopback, print Ready, and on SIGINT/SIGTERM stop accepting, let requests in
// flight finish for a bounded time, then exit 0.
import type {FastifyInstance} from 'fastify'
import {buildApp, type AppOptions} from './app.js'
import {ModelHost} from '../runtime/model-host.js'
import {Metrics} from '../runtime/metrics.js'
import {loadInto, DEFAULT_PACKAGE_DIR} from '../runtime/load-model.js'
import {existsSync} from 'node:fs'
import {resolve as resolvePath} from 'node:path'
import {SplashError} from '../errors.js'

export interface ServeOptions extends AppOptions {
  port: number
  model?: string
  maxMemory?: number
  maxContext?: number
  /** How long requests in flight may run after a stop signal (default 30 s). */
  shutdownGraceMs?: number
  log?: (line: string) => void
}

export interface RunningServer {
  app: FastifyInstance
  url: string
  port: number
  stop(): Promise<void>
}

export const LISTEN_HOST = '127.0.0.1'

export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const log = options.log ?? ((line: string) => process.stdout.write(line + '\n'))
  const modelHost = options.modelHost ?? new ModelHost()
  const metrics = options.metrics ?? new Metrics()
  const app = await buildApp({...options, modelHost, metrics})
  await app.listen({host: LISTEN_HOST, port: options.port})
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : options.port
  const url = `http://${LISTEN_HOST}:${port}`

  let stopping: Promise<void> | undefined
  const stop = () => {
    stopping ??= (async () => {
      const grace = options.shutdownGraceMs ?? 30_000
      const timer = setTimeout(() => app.server.closeAllConnections(), grace)
      timer.unref()
      await app.close()
      clearTimeout(timer)
    })()
    return stopping
  }
  const dir = await modelDir(options.model)
  if (dir) {
    log(`Loading ${dir}`)
    try {
      const loaded = await loadInto(modelHost, {dir, maxMemory: options.maxMemory, maxContext: options.maxContext, log, metrics})
      log(`Serving ${loaded.manifest.name}: context ${loaded.model.contextLength} tokens, up to ${loaded.plan.batchLimit} requests at once`)
    } catch (err) {
      await app.close()
      throw err
    }
  } else {
    log('No model package is loaded: probes and the API answer, generation is unavailable.')
  }
  log(`Ready: ${url}`)
  return {app, url, port, stop}
}

/** Stops the server on the first SIGINT or SIGTERM and resolves once it has stopped. */
export function stopOnSignals(server: RunningServer, log: (line: string) => void): Promise<void> {
  return new Promise(resolve => {
    const onSignal = (signal: NodeJS.Signals) => {
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
      log(`${signal}: finishing requests in flight, then stopping`)
      void server.stop().then(() => {
        log('Stopped')
        resolve()
      })
    }
    process.on('SIGINT', onSignal)
    process.on('SIGTERM', onSignal)
  })
}

/** The folder to serve: --model as a local folder, else the default package when it exists. */
async function modelDir(spec: string | undefined): Promise<string | undefined> {
  if (spec === undefined || spec === '') return existsSync(DEFAULT_PACKAGE_DIR) ? DEFAULT_PACKAGE_DIR : undefined
  const local = resolvePath(spec)
  if (existsSync(local)) return local
  if (/^[\w.-]+\/[\w.-]+$/.test(spec)) {
    const hub = await import('../package/resolve.js').catch(() => undefined)
    if (hub) return (await hub.resolvePackage(spec)).dir
  }
  throw new SplashError('model_not_found', 'not_found', `--model ${spec}: no such folder, and not an owner/repo name`)
}
