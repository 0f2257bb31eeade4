// The shape every agent launcher shares: what the running server offers, and what an agent needs to be
// started against it. Each agent file turns a LaunchTarget into a LaunchPlan; launch.ts does the rest.

/** What the launcher learned from the running server, plus where Splash keeps agent state. */
export interface LaunchTarget {
  /** Server origin without a path, e.g. http://127.0.0.1:8000. */
  baseUrl: string
  /** The served model id, as GET /v1/models lists it. */
  model: string
  /** The served context window in tokens. */
  contextWindow: number
  /** The longest window the served package supports (what --max-context may reach), when the server says. */
  packageContextWindow?: number
  /** Reasoning efforts the package offers ("none" = thinking off) and the one it uses when a request names none. */
  reasoningEfforts?: string[]
  reasoningDefault?: string
  /** Whether the package takes images (it has a vision encoder). */
  vision?: boolean
  /** The key the server requires, when it requires one. */
  apiKey?: string
  /** Splash's data directory (agent configs the launcher writes go below it). */
  dataDir: string
}

/** How to start the agent: environment changes (undefined removes a variable) and arguments before the user's. */
export interface LaunchPlan {
  env: Record<string, string | undefined>
  args: string[]
  /** Files written into the data directory for this launch (for messages and tests). */
  files: string[]
}

export interface AgentSpec {
  /** Command name and executable name, e.g. "claude". */
  bin: string
  /** Human name, e.g. "Claude Code". */
  name: string
  /** How to install it, shown when it is missing or too old. */
  install: string
  /** How to update it, shown when it is too old. */
  update: string
  /** Oldest version that understands the configuration the launcher passes. */
  minVersion: string
  /** Why minVersion, in a few words (shown with the too-old message). */
  minVersionReason: string
  /** Extra places to look when the executable is not on PATH (relative to HOME). */
  fallbackPaths?: string[]
  /** The smallest context window the agent works in, and why (its own prompt and the room it keeps). */
  minContext: number
  minContextReason: string
  /** Refuse to start when the target cannot work (e.g. a context window below the agent's floor). */
  check?(target: LaunchTarget): void
  /**
   * Builds the environment and arguments; may write config files under target.dataDir. `executable` is the agent
   * found and `env` the environment it runs in, for plans that ask the agent itself.
   */
  plan(target: LaunchTarget, executable?: string, env?: NodeJS.ProcessEnv): Promise<LaunchPlan>
}

/** Variable the launcher sets for agents that read the server key from the environment by name. */
export const AGENT_KEY_ENV = 'SPLASH_AGENT_API_KEY'

/** Sent when the server has no key: agents insist on some key, and a keyless server ignores it. */
export const PLACEHOLDER_KEY = 'splash-local'

/** Output budget advertised to agents: a quarter of the window, at most 32K, so compaction leaves room to answer. */
export function outputLimit(contextWindow: number): number {
  return Math.max(256, Math.min(32768, Math.floor(contextWindow / 4)))
}
