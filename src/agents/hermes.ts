// Hermes Agent: a home of its own under Splash's data directory (HERMES_HOME), whose config.yaml selects a
// custom OpenAI-compatible endpoint on /v1 with the served model (for its side tasks too), the Chat Completions API
// mode and the real context length. The user's ~/.hermes is never read or written.
import path from 'node:path'
import {agentDir, writeOwnFile} from './files.js'
import {outputLimit, type AgentSpec, type LaunchTarget} from './types.js'

/** Hermes refuses models with a window below this (its agent loop needs the room). */
export const HERMES_MIN_CONTEXT = 64000
/** Hermes' auxiliary model slots (side LLM calls); delegated subagents inherit the main model by themselves. */
export const AUXILIARY_TASKS = ['vision', 'compression', 'title_generation', 'approval']

/** What Hermes itself writes for keyless local endpoints. */
const NO_KEY = 'no-key-required'

/** A YAML double-quoted scalar: JSON string syntax is valid YAML for it. */
const q = (s: string) => JSON.stringify(s)

export function hermesConfigYaml(t: LaunchTarget): string {
  const baseUrl = `${t.baseUrl}/v1`
  const key = t.apiKey ?? NO_KEY
  return [
    '# Written by `splash hermes` for each launch; edits here are replaced on the next launch.',
    'model:',
    '  provider: custom',
    `  default: ${q(t.model)}`,
    `  base_url: ${q(baseUrl)}`,
    `  api_key: ${q(key)}`,
    '  api_mode: chat_completions',
    `  context_length: ${t.contextWindow}`,
    `  max_tokens: ${outputLimit(t.contextWindow)}`,
    'custom_providers:',
    '  - name: splash',
    `    base_url: ${q(baseUrl)}`,
    `    api_key: ${q(key)}`,
    '    api_mode: chat_completions',
    `    model: ${q(t.model)}`,
    '    models:',
    `      ${q(t.model)}:`,
    `        context_length: ${t.contextWindow}`,
    // side tasks on the served model too (recent releases route "auto" there, older ones to a hosted default)
    'auxiliary:',
    ...AUXILIARY_TASKS.flatMap(task => [`  ${task}:`, '    provider: main', `    model: ${q(t.model)}`]),
    '',
  ].join('\n')
}

export const hermes: AgentSpec = {
  bin: 'hermes',
  name: 'Hermes Agent',
  install: 'pip install hermes-agent',
  update: 'pip install --upgrade hermes-agent',
  minVersion: '0.6.0',
  minVersionReason: 'model.context_length as the first context source and custom providers with api_mode',
  fallbackPaths: ['.local/bin/hermes'],
  minContext: HERMES_MIN_CONTEXT,
  minContextReason: 'it refuses models with a smaller window',
  async plan(t) {
    const home = agentDir(t.dataDir, 'hermes')
    const configPath = path.join(home, 'config.yaml')
    await writeOwnFile(configPath, hermesConfigYaml(t))
    return {env: {HERMES_HOME: home}, args: [], files: [configPath]}
  },
}
