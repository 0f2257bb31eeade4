// Runs the server: listen on loopback, print Ready, and on SIGINT/SIGTERM stop accepting, let requests in
// flight finish for a bounded time, then exit 0.
import type {FastifyInstance} from 'fastify'
import {buildApp, type AppOptions} from './app.js'
import {ModelHost} from '../serving/model-host.js'
import {Metrics} from '../engine/metrics.js'
import {loadInto, defaultPackageDir} from '../serving/load-model.js'
import {existsSync} from 'node:fs'
import {resolvePackage, type Resolved} from '../package/resolve.js'
import {ByteProgress} from '../package/progress.js'
import type {Engine} from '../engine/engine.js'
import {plannedBytes, type MemoryPlan} from '../serving/memory-plan.js'
import {formatBytes} from '../config/units.js'

/** What the Ready line says about the served model: its context and the memory the plan gives it. */
export function readyLine(name: string, context: number, plan: MemoryPlan): string {
  const perContext = context * plan.state.kvBytesPerToken
  return `${name}: context ${context.toLocaleString('en-US')} tokens, ${formatBytes(perContext)} of KV at full length; ${formatBytes(plannedBytes(plan))} of ${plan.memory} planned`
}

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
      // the prefix cache keeps what it holds on disk for the next start
      await loadedEngine?.persist().catch(() => undefined)
    })()
    return stopping
  }
  let loadedEngine: Engine | undefined
  let served = ''
  let resolved: Resolved | undefined
  try {
    resolved = await findPackage(options.model, log)
  } catch (err) {
    await app.close()
    throw err
  }
  if (resolved) {
    const {dir, manifest} = resolved
    log(`Loading ${manifest.name} from ${dir}`)
    try {
      const loaded = await loadInto(modelHost, {dir, manifest, maxMemory: options.maxMemory, maxContext: options.maxContext, log, metrics})
      loadedEngine = loaded.engine
      log(`Serving ${loaded.manifest.name} on ${loaded.model.info.backend} (${loaded.model.info.isa}): context ${loaded.model.contextLength} tokens, up to ${loaded.plan.batchLimit} requests at once`)
      served = ` (${readyLine(loaded.manifest.name, loaded.model.contextLength, loaded.plan)})`
    } catch (err) {
      await app.close()
      throw err
    }
  } else {
    log('No model package is loaded: probes and the API answer, generation is unavailable.')
  }
  log(`Ready: ${url}${served}`)
  return {app, url, port, stop}
}

/**
 * Stops the server on the first SIGINT or SIGTERM and resolves once it has stopped. A second SIGTERM while
 * draining only says so (service managers repeat it; the streams in flight keep going); a third SIGTERM, or a
 * second SIGINT (Ctrl-C twice), exits at once.
 */
export function stopOnSignals(server: RunningServer, log: (line: string) => void, exit: (code: number) => void = code => process.exit(code)): Promise<void> {
  return new Promise(resolve => {
    const seen = {SIGINT: 0, SIGTERM: 0}
    const onSignal = (signal: NodeJS.Signals) => {
      if (signal === 'SIGINT' || signal === 'SIGTERM') seen[signal]++
      if (seen.SIGINT + seen.SIGTERM > 1) {
        if (seen.SIGINT >= 2 || seen.SIGTERM >= 3) {
          log(`${signal} again: exiting now, requests in flight are cut`)
          return exit(130)
        }
        log(`${signal}: still finishing requests in flight (a third SIGTERM or a second SIGINT exits at once)`)
        return
      }
      log(`${signal}: finishing requests in flight, then stopping`)
      void server.stop().then(() => {
        process.off('SIGINT', onSignal)
        process.off('SIGTERM', onSignal)
        log('Stopped')
        resolve()
      })
    }
    process.on('SIGINT', onSignal)
    process.on('SIGTERM', onSignal)
  })
}

/** The package to serve: --model (owner/repo or a folder), else the default package when it exists. */
async function findPackage(spec: string | undefined, log: (line: string) => void): Promise<Resolved | undefined> {
  if (spec === undefined || spec === '') {
    const dir = defaultPackageDir()
    if (dir === '' || !existsSync(dir)) return undefined
    spec = dir
  }
  return resolvePackage(spec, {progress: new ByteProgress(), log})
}
