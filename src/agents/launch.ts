// Starts an agent against the running server: find the executable, check its version, ask the server what it
// serves, write the agent's config into Splash's data directory, run the agent, return its exit code.
import {SplashError} from '../errors.js'
import {dataDir} from '../package/paths.js'
import {discoverServer} from './server.js'
import {compareVersions, findExecutable, mergeEnv, readVersion, runAttached} from './process.js'
import type {AgentSpec, LaunchPlan, LaunchTarget} from './types.js'

export interface Prepared {
  executable: string
  version: string
  target: LaunchTarget
  plan: LaunchPlan
}

/** Everything short of running the agent; throws a one-line SplashError when the agent cannot be started. */
export async function prepareLaunch(agent: AgentSpec, env: NodeJS.ProcessEnv = process.env): Promise<Prepared> {
  const executable = findExecutable(agent.bin, env, agent.fallbackPaths)
  if (!executable) {
    throw new SplashError('agent_not_installed', 'not_found', `${agent.name} is not installed (no \`${agent.bin}\` on PATH): install it with \`${agent.install}\``)
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
  agent.check?.(target)
  const plan = await agent.plan(target)
  return {executable, version, target, plan}
}

/** Runs the agent with the user's arguments after the launcher's own; resolves with the agent's exit code. */
export async function launchAgent(agent: AgentSpec, userArgs: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const {executable, plan} = await prepareLaunch(agent, env)
  try {
    return await runAttached(executable, [...plan.args, ...userArgs], mergeEnv(env, plan.env))
  } catch (err) {
    throw new SplashError('agent_start_failed', 'internal', `Could not start ${executable}: ${(err as Error).message}`)
  }
}
