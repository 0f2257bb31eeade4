// The TypeScript side's environment knobs as one typed object, parsed in one place. Components read it once, when
// they are made (the engine, its scheduler, the native model, the loader), never per step; docs/configuration.md is
// the one table of these knobs. A value that does not parse is ignored, as if unset (the knobs are for diagnosis,
// tests and benchmarks; every user-facing setting is a flag), except SPLASH_PORT, whose user gets a clear error.
import {envSwitch} from './switch.js'

export interface SplashOptions {
  /** SPLASH_DATA_DIR: Splash's data folder (src/package/paths.ts has the platform default). */
  dataDir: string | undefined
  /** SPLASH_DEFAULT_PACKAGE: the package `serve` opens without --model ('' = none). */
  defaultPackage: string | undefined
  /** SPLASH_LOG_LEVEL: the Fastify request log's level (unset: no request log). */
  logLevel: string | undefined
  /** SPLASH_DRAFT=off: open packages without their draft. */
  draftOff: boolean
  /** SPLASH_DRAFT_FIXED (with SPLASH_DRAFT_K): draft this many tokens on every pass, 0 = the block's B − 1; undefined = adaptive. */
  fixedDraft: number | undefined
  /** SPLASH_PREFIX_CACHE=off: no prefix cache. */
  prefixCacheOff: boolean
  /** SPLASH_PREFIX_DISK: the disk tier forced on or off (undefined: on for the CPU backend only). */
  prefixDisk: 'on' | 'off' | undefined
  /** SPLASH_MAX_RUNNING / SPLASH_MAX_WAITING: lower batch limit and queue bound. */
  maxRunning: number | undefined
  maxWaiting: number | undefined
  /** SPLASH_MAX_OUTPUT_TOKENS: a cap on every request's output tokens. */
  maxOutputTokens: number | undefined
  /** SPLASH_TOKEN_BUDGET: tokens per engine step (at least 16). */
  tokenBudget: number | undefined
  /** SPLASH_INLINE_STEPS: short native calls on the JS thread forced on or off (undefined: the backend's default). */
  inlineSteps: 'on' | 'off' | undefined
  /** SPLASH_GATHER: an idle engine's gathering of requests that arrive together forced on or off (undefined: the backend's default). */
  gather: 'on' | 'off' | undefined
  /** SPLASH_TRACE_STEPS: a file that gets one line per engine step. */
  traceSteps: string | undefined
  /** SPLASH_PORT / SPLASH_API_KEY: the server an agent launcher talks to (src/agents/server.ts checks the port). */
  agentPort: string | undefined
  agentApiKey: string | undefined
  /** SPLASH_BENCH_CACHE / SPLASH_PEER_PATH: `splash bench`'s package cache and node-llama-cpp's folder. */
  benchCache: string | undefined
  peerPath: string | undefined
  /** SPLASH_NVCC: the nvcc that package kernels are compiled with. */
  nvcc: string | undefined
}

const positive = (v: string | undefined): number | undefined => {
  const s = v?.trim()
  return s !== undefined && /^[1-9]\d*$/.test(s) && Number.isSafeInteger(Number(s)) ? Number(s) : undefined
}
const text = (v: string | undefined): string | undefined => v?.trim() || undefined

/** The options the environment gives (process.env unless told otherwise). */
export function readOptions(env: NodeJS.ProcessEnv = process.env): SplashOptions {
  const budget = positive(env.SPLASH_TOKEN_BUDGET)
  return {
    dataDir: env.SPLASH_DATA_DIR || undefined,
    defaultPackage: env.SPLASH_DEFAULT_PACKAGE,
    logLevel: env.SPLASH_LOG_LEVEL,
    draftOff: envSwitch(env.SPLASH_DRAFT) === 'off',
    fixedDraft: env.SPLASH_DRAFT_FIXED ? (positive(env.SPLASH_DRAFT_K) ?? 0) : undefined,
    prefixCacheOff: envSwitch(env.SPLASH_PREFIX_CACHE) === 'off',
    prefixDisk: envSwitch(env.SPLASH_PREFIX_DISK),
    maxRunning: positive(env.SPLASH_MAX_RUNNING),
    maxWaiting: positive(env.SPLASH_MAX_WAITING),
    maxOutputTokens: positive(env.SPLASH_MAX_OUTPUT_TOKENS),
    tokenBudget: budget === undefined ? undefined : Math.max(16, budget),
    inlineSteps: envSwitch(env.SPLASH_INLINE_STEPS),
    gather: envSwitch(env.SPLASH_GATHER),
    traceSteps: text(env.SPLASH_TRACE_STEPS),
    agentPort: text(env.SPLASH_PORT),
    agentApiKey: text(env.SPLASH_API_KEY),
    benchCache: env.SPLASH_BENCH_CACHE || undefined,
    peerPath: env.SPLASH_PEER_PATH || undefined,
    nvcc: env.SPLASH_NVCC || undefined,
  }
}
