// Claude Code: configured through the environment only (nothing written to disk). It speaks Anthropic Messages
// to ANTHROPIC_BASE_URL (the origin, no /v1). Every model slot names the served model, so side calls (titles,
// summaries, subagents) hit it too; the real context window replaces the 200K it assumes for unknown ids.
import {outputLimit, PLACEHOLDER_KEY, type AgentSpec, type LaunchTarget} from './types.js'

export function claudeEnv(t: LaunchTarget): Record<string, string | undefined> {
  const window = String(t.contextWindow)
  return {
    ANTHROPIC_BASE_URL: t.baseUrl,
    // Sent as "Authorization: Bearer"; a keyless server ignores it.
    ANTHROPIC_AUTH_TOKEN: t.apiKey ?? PLACEHOLDER_KEY,
    // A key of the user's own would be sent as x-api-key (and ask for approval): keep it away from the server.
    ANTHROPIC_API_KEY: '',
    ANTHROPIC_MODEL: t.model,
    ANTHROPIC_DEFAULT_OPUS_MODEL: t.model,
    ANTHROPIC_DEFAULT_SONNET_MODEL: t.model,
    ANTHROPIC_DEFAULT_HAIKU_MODEL: t.model,
    // The newest tier slot (2.1.19x); older releases ignore it.
    ANTHROPIC_DEFAULT_FABLE_MODEL: t.model,
    CLAUDE_CODE_SUBAGENT_MODEL: t.model,
    // The small/fast slot of older releases, and the background classifier and auto mode's model.
    ANTHROPIC_SMALL_FAST_MODEL: t.model,
    CLAUDE_CODE_BG_CLASSIFIER_MODEL: t.model,
    CLAUDE_CODE_AUTO_MODE_MODEL: t.model,
    // The model's window for ids that do not start with "claude-" (otherwise 200K is assumed)...
    CLAUDE_CODE_MAX_CONTEXT_TOKENS: window,
    // ...and the window auto-compaction measures against.
    CLAUDE_CODE_AUTO_COMPACT_WINDOW: window,
    CLAUDE_CODE_MAX_OUTPUT_TOKENS: String(outputLimit(t.contextWindow)),
    // The per-request attribution block changes every call and would defeat the server's prefix cache.
    CLAUDE_CODE_ATTRIBUTION_HEADER: '0',
    // No telemetry, error reporting or update checks: nothing leaves the machine.
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    // A cloud-provider switch in the user's shell would send requests elsewhere.
    CLAUDE_CODE_USE_BEDROCK: undefined,
    CLAUDE_CODE_USE_VERTEX: undefined,
    CLAUDE_CODE_USE_FOUNDRY: undefined,
  }
}

export const claude: AgentSpec = {
  bin: 'claude',
  name: 'Claude Code',
  install: 'npm install -g @anthropic-ai/claude-code',
  update: 'npm install -g @anthropic-ai/claude-code@latest',
  minVersion: '2.1.193',
  // Checked in the published builds: 2.1.191 reads CLAUDE_CODE_MAX_CONTEXT_TOKENS only with DISABLE_COMPACT.
  minVersionReason: 'the first release that takes CLAUDE_CODE_MAX_CONTEXT_TOKENS as the window of a non-Claude model; older ones assume 200K',
  fallbackPaths: ['.local/bin/claude', '.claude/local/claude'],
  minContext: 65536,
  minContextReason: 'its first request, 24 tools and its system prompt, is about 23K tokens, and it keeps room for its answer and for compacting',
  async plan(t) {
    return {env: claudeEnv(t), args: [], files: []}
  },
}
