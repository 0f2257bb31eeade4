// What each launcher builds from a LaunchTarget, without starting anything: environment, -c overrides, inline
// config and config files; plus version comparison and argument pass-through rules.
import t from 'tap'
import type {Test} from 'tap'
import {mkdtempSync, readFileSync, rmSync, statSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {claude, claudeEnv} from '../../src/agents/claude.js'
import {codex, codexArgs, codexCatalogEntry} from '../../src/agents/codex.js'
import {opencode, opencodeConfig} from '../../src/agents/opencode.js'
import {hermes, hermesConfigYaml, HERMES_MIN_CONTEXT} from '../../src/agents/hermes.js'
import {compareVersions, mergeEnv} from '../../src/agents/process.js'
import {agentArgs} from '../../src/agents/command.js'
import {outputLimit, type LaunchTarget} from '../../src/agents/types.js'

function target(over: Partial<LaunchTarget> = {}): LaunchTarget {
  return {baseUrl: 'http://127.0.0.1:8123', model: 'splash/tiny-chat', contextWindow: 131072, dataDir: '/nowhere', ...over}
}

function tmpData(t: Test): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'splash-agent-config-'))
  t.teardown(() => rmSync(dir, {recursive: true, force: true}))
  return dir
}

t.test('versions compare numerically, and the environment merge removes what the plan unsets', async t => {
  t.ok(compareVersions('2.1.197', '2.1.200') < 0)
  t.ok(compareVersions('0.134.0', '0.99.9') > 0)
  t.equal(compareVersions('1.0.0', '1.0.0'), 0)
  const env = mergeEnv({A: '1', B: '2', KEEP: 'k'}, {A: 'x', B: undefined, C: '3'})
  t.same(env, {A: 'x', KEEP: 'k', C: '3'})
})

t.test('arguments pass through unchanged; only a leading -- is dropped', async t => {
  t.same(agentArgs(['-p', 'hi', '--model', 'x', '--', 'y']), ['-p', 'hi', '--model', 'x', '--', 'y'])
  t.same(agentArgs(['--', '--help']), ['--help'])
  t.same(agentArgs([]), [])
})

t.test('Claude Code: base URL without /v1, token, every model slot, the real window, cache-friendly and quiet', async t => {
  const env = claudeEnv(target({apiKey: 'sekret'}))
  t.equal(env.ANTHROPIC_BASE_URL, 'http://127.0.0.1:8123')
  t.equal(env.ANTHROPIC_AUTH_TOKEN, 'sekret')
  t.equal(env.ANTHROPIC_API_KEY, '', "the user's own Anthropic key is blanked")
  for (const k of ['ANTHROPIC_MODEL', 'ANTHROPIC_DEFAULT_OPUS_MODEL', 'ANTHROPIC_DEFAULT_SONNET_MODEL', 'ANTHROPIC_DEFAULT_HAIKU_MODEL', 'ANTHROPIC_DEFAULT_FABLE_MODEL', 'CLAUDE_CODE_SUBAGENT_MODEL']) {
    t.equal(env[k], 'splash/tiny-chat', k)
  }
  t.equal(env.CLAUDE_CODE_MAX_CONTEXT_TOKENS, '131072')
  t.equal(env.CLAUDE_CODE_AUTO_COMPACT_WINDOW, '131072')
  t.equal(env.CLAUDE_CODE_MAX_OUTPUT_TOKENS, String(outputLimit(131072)))
  t.equal(env.CLAUDE_CODE_ATTRIBUTION_HEADER, '0')
  t.equal(env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, '1')
  t.ok('CLAUDE_CODE_USE_BEDROCK' in env && env.CLAUDE_CODE_USE_BEDROCK === undefined, 'cloud-provider switches are removed')
  t.equal(claudeEnv(target()).ANTHROPIC_AUTH_TOKEN, 'splash-local', 'a placeholder token when the server has no key')
  const plan = await claude.plan(target())
  t.same(plan.args, [], 'no arguments of its own: the user’s stay first and unchanged')
  t.same(plan.files, [], 'nothing written to disk')
})

t.test('Codex: a responses provider and a catalog entry, all through -c overrides', async t => {
  const data = tmpData(t)
  const plan = await codex.plan(target({dataDir: data, apiKey: 'sekret'}))
  const catalogPath = path.join(data, 'agents', 'codex', 'model-catalog.json')
  t.same(plan.files, [catalogPath])
  t.equal(plan.env.SPLASH_AGENT_API_KEY, 'sekret')
  const overrides = new Map<string, string>()
  for (let i = 0; i < plan.args.length; i += 2) {
    t.equal(plan.args[i], '-c')
    const [k, ...v] = plan.args[i + 1].split('=')
    overrides.set(k, v.join('='))
  }
  t.equal(overrides.get('model_provider'), '"splash"')
  t.equal(overrides.get('model'), '"splash/tiny-chat"')
  t.equal(overrides.get('model_providers.splash.base_url'), '"http://127.0.0.1:8123/v1"')
  t.equal(overrides.get('model_providers.splash.wire_api'), '"responses"')
  t.equal(overrides.get('model_providers.splash.env_key'), '"SPLASH_AGENT_API_KEY"')
  t.equal(overrides.get('model_catalog_json'), JSON.stringify(catalogPath))
  t.equal(overrides.get('model_context_window'), '131072')
  t.same(plan.args, codexArgs(target({dataDir: data}), catalogPath))

  const catalog = JSON.parse(readFileSync(catalogPath, 'utf8')) as {models: Array<Record<string, unknown>>}
  t.equal(catalog.models.length, 1)
  const entry = catalog.models[0]
  t.same(entry, codexCatalogEntry(target({dataDir: data, apiKey: 'sekret'})))
  t.equal(entry.slug, 'splash/tiny-chat')
  t.equal(entry.context_window, 131072)
  t.equal(entry.apply_patch_tool_type, 'freeform')
  t.same((entry.supported_reasoning_levels as Array<{effort: string}>).map(l => l.effort), ['none', 'low', 'medium', 'high'])
  t.equal(entry.default_reasoning_level, 'medium')
  for (const k of ['display_name', 'shell_type', 'visibility', 'supported_in_api', 'priority', 'base_instructions', 'supports_reasoning_summaries', 'support_verbosity', 'truncation_policy', 'supports_parallel_tool_calls', 'experimental_supported_tools']) {
    t.ok(k in entry, `catalog entry has ${k} (Codex requires it)`)
  }
  t.equal(statSync(catalogPath).mode & 0o777, 0o600, 'owner-only file')
  t.equal((await codex.plan(target({dataDir: data}))).env.SPLASH_AGENT_API_KEY, 'splash-local')
})

t.test('opencode: inline config with an openai-compatible provider, limits, tools and reasoning', async t => {
  const plan = await opencode.plan(target({apiKey: 'sekret'}))
  t.same(plan.files, [])
  t.same(plan.args, [])
  t.same(Object.keys(plan.env), ['OPENCODE_CONFIG_CONTENT'])
  const config = JSON.parse(plan.env.OPENCODE_CONFIG_CONTENT!) as ReturnType<typeof opencodeConfig> & Record<string, any>
  t.same(config, opencodeConfig(target({apiKey: 'sekret'})))
  const provider = config.provider.splash
  t.equal(provider.npm, '@ai-sdk/openai-compatible')
  t.equal(provider.options.baseURL, 'http://127.0.0.1:8123/v1')
  t.equal(provider.options.apiKey, 'sekret')
  t.equal((opencodeConfig(target()) as Record<string, any>).provider.splash.options.apiKey, 'splash-local', 'a placeholder key when the server has none')
  const model = provider.models['splash/tiny-chat']
  t.same(model.limit, {context: 131072, output: outputLimit(131072)})
  t.equal(model.tool_call, true)
  t.equal(model.reasoning, true)
  t.equal(config.model, 'splash/splash/tiny-chat')
  t.equal(config.small_model, 'splash/splash/tiny-chat')
})

t.test('Hermes: its own HERMES_HOME under the data directory with a custom provider', async t => {
  const data = tmpData(t)
  const plan = await hermes.plan(target({dataDir: data, apiKey: 'sekret'}))
  const home = path.join(data, 'agents', 'hermes')
  t.same(plan.env, {HERMES_HOME: home})
  t.same(plan.args, [])
  const text = readFileSync(path.join(home, 'config.yaml'), 'utf8')
  t.same(plan.files, [path.join(home, 'config.yaml')])
  t.equal(text, hermesConfigYaml(target({dataDir: data, apiKey: 'sekret'})))
  t.match(text, /^model:\n {2}provider: custom\n {2}default: "splash\/tiny-chat"\n {2}base_url: "http:\/\/127\.0\.0\.1:8123\/v1"\n {2}api_key: "sekret"\n {2}api_mode: chat_completions\n {2}context_length: 131072\n/m)
  t.match(text, /custom_providers:\n {2}- name: splash\n/)
  t.match(hermesConfigYaml(target()), /api_key: "no-key-required"/)
  t.equal(statSync(path.join(home, 'config.yaml')).mode & 0o777, 0o600, 'owner-only file (it may hold the key)')
  t.throws(() => hermes.check!(target({contextWindow: HERMES_MIN_CONTEXT - 1})), /at least 64K tokens .*--max-context 64K/)
  t.doesNotThrow(() => hermes.check!(target({contextWindow: HERMES_MIN_CONTEXT})))
})

t.test('every launcher states a minimum version, its reason, and how to install and update', async t => {
  for (const agent of [claude, codex, opencode, hermes]) {
    t.match(agent.minVersion, /^\d+\.\d+\.\d+$/, agent.name)
    t.ok(agent.minVersionReason.length > 10, `${agent.name} says why`)
    t.match(agent.install, /^(npm install -g|pip install) /)
    t.match(agent.update, /^(npm install -g|pip install --upgrade) /)
  }
})
