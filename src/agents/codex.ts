// Codex CLI: a "splash" model provider speaking the Responses API, selected through -c overrides (the user's
// config.toml is never written), and a model catalog file in Splash's data directory telling Codex the window,
// the package's reasoning efforts, its input modalities, that apply_patch is a freeform tool, and the instructions
// Codex sends: its own, taken from the catalog the installed Codex ships (`codex debug models --bundled`).
import {execFile} from 'node:child_process'
import path from 'node:path'
import {SplashError} from '../errors.js'
import {agentDir, writeOwnFile} from './files.js'
import {AGENT_KEY_ENV, PLACEHOLDER_KEY, type AgentSpec, type LaunchTarget} from './types.js'

export const CODEX_PROVIDER = 'splash'

/** The efforts Codex's catalog accepts, with the words its picker shows. */
const CODEX_EFFORTS: Record<string, string> = {
  none: 'Answer without thinking',
  minimal: 'Think as little as possible',
  low: 'Think briefly',
  medium: 'Think before answering',
  high: 'Think at length on hard problems',
  xhigh: 'Think longest',
  max: 'Think as long as it takes',
  ultra: 'Think as long as it takes',
}
const FALLBACK_EFFORTS = ['none', 'low', 'medium', 'high']

/** The package's efforts that Codex knows, and its default (the package's, when Codex knows it). */
export function codexEfforts(t: LaunchTarget): {levels: string[]; default: string} {
  const offered = (t.reasoningEfforts ?? FALLBACK_EFFORTS).filter(e => e in CODEX_EFFORTS)
  const levels = offered.length > 0 ? offered : FALLBACK_EFFORTS
  const wanted = t.reasoningDefault ?? 'medium'
  return {levels, default: levels.includes(wanted) ? wanted : levels[Math.floor(levels.length / 2)]}
}

/** One entry of Codex's model catalog (`model_catalog_json`), in the shape Codex's ModelInfo parses. */
export function codexCatalogEntry(t: LaunchTarget, instructions: string): Record<string, unknown> {
  const efforts = codexEfforts(t)
  return {
    slug: t.model,
    display_name: t.model,
    description: `Served by Splash at ${t.baseUrl}`,
    default_reasoning_level: efforts.default,
    supported_reasoning_levels: efforts.levels.map(effort => ({effort, description: CODEX_EFFORTS[effort]})),
    shell_type: 'default',
    visibility: 'list',
    supported_in_api: true,
    priority: 0,
    upgrade: null,
    // Codex sends these as the request's instructions; empty, it sends none at all.
    base_instructions: instructions,
    supports_reasoning_summaries: true,
    support_verbosity: false,
    default_verbosity: null,
    apply_patch_tool_type: 'freeform',
    truncation_policy: {mode: 'tokens', limit: 10000},
    supports_parallel_tool_calls: true,
    context_window: t.contextWindow,
    experimental_supported_tools: [],
    input_modalities: t.vision === true ? ['text', 'image'] : ['text'],
    // the model approvals go to when approvals_reviewer is auto_review (Codex's own catalog names codex-auto-review)
    auto_review_model_override: t.model,
  }
}

/**
 * The base instructions of the model the installed Codex itself lists first (its lowest priority number among
 * visible models), from the catalog built into the binary.
 */
export function ownInstructions(executable: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const refuse = (why: string) =>
    new SplashError(
      'agent_catalog_unreadable',
      'invalid_request',
      `\`${executable} debug models --bundled\` ${why}; the launcher takes Codex's own instructions from that catalog: update with \`${codex.update}\``,
    )
  return new Promise((resolve, reject) => {
    execFile(executable, ['debug', 'models', '--bundled'], {env, timeout: 30_000, maxBuffer: 64 * 1024 ** 2, windowsHide: true}, (err, stdout) => {
      if (err) return reject(refuse('failed'))
      let models: Array<{visibility?: unknown; priority?: unknown; base_instructions?: unknown}>
      try {
        models = (JSON.parse(stdout) as {models: typeof models}).models
      } catch {
        return reject(refuse('printed no model catalog'))
      }
      const own = (Array.isArray(models) ? models : [])
        .filter(m => m.visibility === 'list' && typeof m.base_instructions === 'string' && m.base_instructions !== '')
        .sort((a, b) => Number(a.priority ?? Infinity) - Number(b.priority ?? Infinity))[0]
      if (!own) return reject(refuse('lists no model with instructions'))
      resolve(own.base_instructions as string)
    })
  })
}

/** A `-c key=value` override; strings are TOML basic strings (JSON quoting is valid TOML for these). */
function set(key: string, value: string | number): string[] {
  return ['-c', `${key}=${typeof value === 'string' ? JSON.stringify(value) : String(value)}`]
}

export function codexArgs(t: LaunchTarget, catalogPath: string): string[] {
  const p = `model_providers.${CODEX_PROVIDER}`
  return [
    ...set(`${p}.name`, 'Splash'),
    ...set(`${p}.base_url`, `${t.baseUrl}/v1`),
    ...set(`${p}.wire_api`, 'responses'),
    ...set(`${p}.env_key`, AGENT_KEY_ENV),
    ...set('model_provider', CODEX_PROVIDER),
    ...set('model', t.model),
    // /review runs on its own model slot
    ...set('review_model', t.model),
    ...set('model_catalog_json', catalogPath),
    ...set('model_context_window', t.contextWindow),
    // the effort the banner shows is this setting; without it the banner says "none" while requests send the
    // catalog's default
    ...set('model_reasoning_effort', codexEfforts(t).default),
  ]
}

export const codex: AgentSpec = {
  bin: 'codex',
  name: 'Codex CLI',
  install: 'npm install -g @openai/codex',
  update: 'npm install -g @openai/codex@latest',
  // Checked in the published builds: 0.104.0 has no model_catalog_json; 0.105.0 takes this catalog.
  minVersion: '0.105.0',
  minVersionReason: 'the first release that reads a model_catalog_json file, which carries the window, reasoning levels and apply_patch tool type',
  minContext: 32768,
  minContextReason: 'its own instructions and tools are about 10K tokens, and it compacts once a conversation nears the window',
  async plan(t, executable = 'codex', env = process.env) {
    const instructions = await ownInstructions(executable, env)
    const catalogPath = path.join(agentDir(t.dataDir, 'codex'), 'model-catalog.json')
    await writeOwnFile(catalogPath, JSON.stringify({models: [codexCatalogEntry(t, instructions)]}, null, 2) + '\n')
    return {
      // Codex reads the provider key from the variable named by env_key; it insists on one being set.
      env: {[AGENT_KEY_ENV]: t.apiKey ?? PLACEHOLDER_KEY},
      args: codexArgs(t, catalogPath),
      files: [catalogPath],
    }
  },
}
