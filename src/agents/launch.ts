// Starts an agent against the running server: find the executable, check its version, ask the server what it
// serves, write the agent's config into Splash's data directory, run the agent, return its exit code.
import {SplashError} from '../errors.js'
import {dataDir} from '../package/paths.js'
import {discoverServer} from './server.js'
import {compareVersions, findExecutable, mergeEnv, projectAgentDirs, readVersion, runAttached, withNode} from './process.js'
import type {AgentSpec, LaunchPlan, LaunchTarget} from './types.js'

export interface Prepared {
  executable: string
  version: string
  target: LaunchTarget
  plan: LaunchPlan
}

/** A token count as --max-context takes it: 65536 → 64K. */
function asFlag(n: number): string {
  return n % 1024 === 0 ? `${n / 1024}K` : String(n)
}

/** Refuses a served window below what the agent needs, saying how to serve a larger one. */
export function checkContext(agent: AgentSpec, t: LaunchTarget): void {
  if (t.contextWindow >= agent.minContext) return
  const need = `${agent.name} needs a context window of at least ${agent.minContext.toLocaleString('en-US')} tokens (${agent.minContextReason})`
  const pkg = t.packageContextWindow
  const message =
    pkg !== undefined && pkg < agent.minContext
      ? `${need}, and ${t.model} supports at most ${pkg.toLocaleString('en-US')}: serve a package with a longer window (\`splash serve --model <package>\`)`
      : `${need}, and the server on ${t.baseUrl} serves ${t.contextWindow.toLocaleString('en-US')}: restart it with \`--max-context ${asFlag(agent.minContext)}\` or more${pkg !== undefined ? ` (${t.model} supports up to ${pkg.toLocaleString('en-US')})` : ''}`
  throw new SplashError('context_too_small', 'invalid_request', message)
}

/**
 * Everything short of running the agent; throws a one-line SplashError when the agent cannot be started. The agent
 * is looked for on PATH, then in `dirs` (by default the project's node_modules/.bin and .agents/bin).
 */
export async function prepareLaunch(agent: AgentSpec, userEnv: NodeJS.ProcessEnv = process.env, dirs: string[] = projectAgentDirs()): Promise<Prepared> {
  const executable = findExecutable(agent.bin, userEnv, agent.fallbackPaths, dirs)
  const env = withNode(userEnv)
  if (!executable) {
    throw new SplashError(
      'agent_not_installed',
      'not_found',
      `${agent.name} is not installed (no \`${agent.bin}\` on PATH, in node_modules/.bin or in .agents/bin): install it with \`${agent.install}\``,
    )
  }
  const version = await readVersion(executable, env)
  if (!version) {
    throw new SplashError(
      'agent_version_unknown',
      'invalid_request',
      `\`${executable} --version\` printed no version; ${agent.name} ${agent.minVersion} or newer is needed (${agent.update})`,
    )
  }
  if (compareVersions(version, agent.minVersion) < 0) {
    throw new SplashError(
      'agent_too_old',
      'invalid_request',
      `${agent.name} ${version} is too old: Splash needs ${agent.minVersion} or newer (${agent.minVersionReason}); update with \`${agent.update}\``,
    )
  }
  const served = await discoverServer(env)
  const target: LaunchTarget = {...served, dataDir: dataDir(env)}
  checkContext(agent, target)
  agent.check?.(target)
  const plan = await agent.plan(target, executable, env)
  return {executable, version, target, plan}
}

/** Runs the agent with the user's arguments after the launcher's own; resolves with the agent's exit code. */
export async function launchAgent(agent: AgentSpec, userArgs: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const {executable, plan} = await prepareLaunch(agent, env)
  try {
    return await runAttached(executable, [...plan.args, ...userArgs], mergeEnv(withNode(env), plan.env))
  } catch (err) {
    throw new SplashError('agent_start_failed', 'internal', `Could not start ${executable}: ${(err as Error).message}`)
  }
}
