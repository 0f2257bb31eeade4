// Codex CLI: a "splash" model provider speaking the Responses API, selected through -c overrides (the user's
// config.toml is never written), and a model catalog file in Splash's data directory telling Codex the window,
// the reasoning efforts and that apply_patch is a freeform tool.
import path from 'node:path'
import {agentDir, writeOwnFile} from './files.js'
import {AGENT_KEY_ENV, PLACEHOLDER_KEY, type AgentSpec, type LaunchTarget} from './types.js'

export const CODEX_PROVIDER = 'splash'

const EFFORTS: Array<[string, string]> = [
  ['none', 'Answer without thinking'],
  ['low', 'Think briefly'],
  ['medium', 'Think before answering (default)'],
  ['high', 'Think at length on hard problems'],
]

/** One entry of Codex's model catalog (`model_catalog_json`), in the shape Codex's ModelInfo parses. */
export function codexCatalogEntry(t: LaunchTarget): Record<string, unknown> {
  return {
    slug: t.model,
    display_name: t.model,
    description: `Served by Splash at ${t.baseUrl}`,
    default_reasoning_level: 'medium',
    supported_reasoning_levels: EFFORTS.map(([effort, description]) => ({effort, description})),
    shell_type: 'default',
    visibility: 'list',
    supported_in_api: true,
    priority: 0,
    upgrade: null,
    // Empty: Codex then sends its own developer instructions, as it does for models it knows nothing about.
    base_instructions: '',
    supports_reasoning_summaries: true,
    support_verbosity: false,
    default_verbosity: null,
    apply_patch_tool_type: 'freeform',
    truncation_policy: {mode: 'tokens', limit: 10000},
    supports_parallel_tool_calls: true,
    context_window: t.contextWindow,
    experimental_supported_tools: [],
    input_modalities: ['text'],
  }
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
    ...set('model_catalog_json', catalogPath),
    ...set('model_context_window', t.contextWindow),
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
  async plan(t) {
    const catalogPath = path.join(agentDir(t.dataDir, 'codex'), 'model-catalog.json')
    await writeOwnFile(catalogPath, JSON.stringify({models: [codexCatalogEntry(t)]}, null, 2) + '\n')
    return {
      // Codex reads the provider key from the variable named by env_key; it insists on one being set.
      env: {[AGENT_KEY_ENV]: t.apiKey ?? PLACEHOLDER_KEY},
      args: codexArgs(t, catalogPath),
      files: [catalogPath],
    }
  },
}
