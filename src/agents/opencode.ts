// opencode: an inline config in OPENCODE_CONFIG_CONTENT (merged over the user's own config files, which stay
// untouched) with an OpenAI-compatible "splash" provider on /v1, the served model's limits, tool calling and
// reasoning, and that model selected for both the main and the small-task slots.
import {outputLimit, PLACEHOLDER_KEY, type AgentSpec, type LaunchTarget} from './types.js'

export const OPENCODE_PROVIDER = 'splash'

export function opencodeConfig(t: LaunchTarget): Record<string, unknown> {
  const selected = `${OPENCODE_PROVIDER}/${t.model}`
  return {
    $schema: 'https://opencode.ai/config.json',
    provider: {
      [OPENCODE_PROVIDER]: {
        npm: '@ai-sdk/openai-compatible',
        name: 'Splash',
        options: {
          baseURL: `${t.baseUrl}/v1`,
          // The value itself: opencode 1.0 does not expand {env:…} in OPENCODE_CONFIG_CONTENT.
          apiKey: t.apiKey ?? PLACEHOLDER_KEY,
        },
        models: {
          [t.model]: {
            name: t.model,
            limit: {context: t.contextWindow, output: outputLimit(t.contextWindow)},
            tool_call: true,
            reasoning: true,
            attachment: t.vision === true,
            temperature: true,
            modalities: {input: t.vision === true ? ['text', 'image'] : ['text'], output: ['text']},
          },
        },
      },
    },
    model: selected,
    small_model: selected,
  }
}

export const opencode: AgentSpec = {
  bin: 'opencode',
  name: 'opencode',
  install: 'npm install -g opencode-ai',
  update: 'npm install -g opencode-ai@latest',
  // Checked: 1.0.0 takes this inline config and talks to the provider as configured.
  minVersion: '1.0.0',
  minVersionReason: 'OPENCODE_CONFIG_CONTENT with the 1.x provider schema (model limits, tool_call, reasoning, small_model)',
  minContext: 32768,
  minContextReason: 'its first request, tools and system prompt, is about 8K tokens, and it compacts once a conversation nears the window',
  async plan(t) {
    return {
      env: {OPENCODE_CONFIG_CONTENT: JSON.stringify(opencodeConfig(t))},
      args: [],
      files: [],
    }
  },
}
