// What each launcher builds from a LaunchTarget, without starting anything: environment, -c overrides, inline
// config and config files; plus version comparison and argument pass-through rules.
import t from 'tap'
import type {Test} from 'tap'
import {chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {claude, claudeEnv} from '../../src/agents/claude.js'
import {codex, codexArgs, codexCatalogEntry, codexEfforts} from '../../src/agents/codex.js'
import {opencode, opencodeConfig} from '../../src/agents/opencode.js'
import {hermes, hermesConfigYaml, HERMES_MIN_CONTEXT} from '../../src/agents/hermes.js'
import {compareVersions, findExecutable, mergeEnv, projectAgentDirs} from '../../src/agents/process.js'
import {checkContext} from '../../src/agents/launch.js'
import {FAKE_CODEX_INSTRUCTIONS, installFake, makeSandbox} from './fake-agents.js'
import {agentArgs} from '../../src/agents/command.js'
import {outputLimit, type LaunchTarget} from '../../src/agents/types.js'

const CLAUDE_SLOTS = [
  'ANTHROPIC_MODEL', 'ANTHROPIC_DEFAULT_OPUS_MODEL', 'ANTHROPIC_DEFAULT_SONNET_MODEL', 'ANTHROPIC_DEFAULT_HAIKU_MODEL',
  'ANTHROPIC_DEFAULT_FABLE_MODEL', 'CLAUDE_CODE_SUBAGENT_MODEL', 'ANTHROPIC_SMALL_FAST_MODEL', 'CLAUDE_CODE_BG_CLASSIFIER_MODEL',
  'CLAUDE_CODE_AUTO_MODE_MODEL',
]

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
  for (const k of CLAUDE_SLOTS) {
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
  const sb = makeSandbox()
  t.teardown(sb.cleanup)
  const exe = installFake(sb, 'codex')
  const plan = await codex.plan(target({dataDir: data, apiKey: 'sekret'}), exe)
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
  t.equal(overrides.get('review_model'), '"splash/tiny-chat"', '/review runs on the served model')
  t.equal(overrides.get('model_reasoning_effort'), '"medium"', 'the banner shows the effort requests send')
  t.same(plan.args, codexArgs(target({dataDir: data}), catalogPath))

  const catalog = JSON.parse(readFileSync(catalogPath, 'utf8')) as {models: Array<Record<string, unknown>>}
  t.equal(catalog.models.length, 1)
  const entry = catalog.models[0]
  t.same(entry, codexCatalogEntry(target({dataDir: data, apiKey: 'sekret'}), FAKE_CODEX_INSTRUCTIONS))
  t.equal(entry.auto_review_model_override, 'splash/tiny-chat', 'auto review runs on the served model too')
  t.equal(entry.base_instructions, FAKE_CODEX_INSTRUCTIONS, "Codex's own instructions: its first listed model's, from its bundled catalog")
  t.equal(entry.slug, 'splash/tiny-chat')
  t.equal(entry.context_window, 131072)
  t.equal(entry.apply_patch_tool_type, 'freeform')
  t.same((entry.supported_reasoning_levels as Array<{effort: string}>).map(l => l.effort), ['none', 'low', 'medium', 'high'], 'a target without efforts: the usual four')
  t.equal(entry.default_reasoning_level, 'medium')
  for (const k of ['display_name', 'shell_type', 'visibility', 'supported_in_api', 'priority', 'base_instructions', 'supports_reasoning_summaries', 'support_verbosity', 'truncation_policy', 'supports_parallel_tool_calls', 'experimental_supported_tools']) {
    t.ok(k in entry, `catalog entry has ${k} (Codex requires it)`)
  }
  t.equal(statSync(catalogPath).mode & 0o777, 0o600, 'owner-only file')
  t.equal((await codex.plan(target({dataDir: data}), exe)).env.SPLASH_AGENT_API_KEY, 'splash-local')
  t.same(entry.input_modalities, ['text'])
  t.same((codexCatalogEntry(target({vision: true}), 'x') as {input_modalities: string[]}).input_modalities, ['text', 'image'])
  // a Codex that cannot print its catalog: refused, with the update command
  const broken = path.join(sb.binDir, 'codex-broken')
  writeFileSync(broken, '#!/bin/sh\nexit 3\n')
  chmodSync(broken, 0o755)
  await t.rejects(codex.plan(target({dataDir: tmpData(t)}), broken), {
    code: 'agent_catalog_unreadable',
    message: /^`\S+codex-broken debug models --bundled` failed; the launcher takes Codex's own instructions from that catalog: update with `npm install -g @openai\/codex@latest`$/,
  })
})

t.test("Codex: the package's efforts that Codex knows, and the package's default", async t => {
  t.same(codexEfforts(target({reasoningEfforts: ['none', 'low', 'medium', 'high', 'xhigh'], reasoningDefault: 'low'})), {levels: ['none', 'low', 'medium', 'high', 'xhigh'], default: 'low'})
  t.same(codexEfforts(target({reasoningEfforts: ['none', 'turbo', 'high'], reasoningDefault: 'turbo'})), {levels: ['none', 'high'], default: 'high'})
  t.same(codexEfforts(target()), {levels: ['none', 'low', 'medium', 'high'], default: 'medium'}, 'an older server that lists none')
  const entry = codexCatalogEntry(target({reasoningEfforts: ['none', 'high'], reasoningDefault: 'none'}), 'x') as Record<string, any>
  t.equal(entry.default_reasoning_level, 'none')
  t.same(entry.supported_reasoning_levels.map((l: {effort: string}) => l.effort), ['none', 'high'])
  const args = codexArgs(target({reasoningEfforts: ['none', 'high'], reasoningDefault: 'none'}), '/c.json')
  t.ok(args.includes('model_reasoning_effort="none"'), 'the banner and the requests agree')
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
  t.same(model.modalities, {input: ['text'], output: ['text']})
  t.equal(model.attachment, false, 'no image attachments for a package without a vision encoder')
  const seeing = (opencodeConfig(target({vision: true})) as Record<string, any>).provider.splash.models['splash/tiny-chat']
  t.same(seeing.modalities.input, ['text', 'image'])
  t.equal(seeing.attachment, true)
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
  for (const task of ['vision', 'compression', 'title_generation', 'approval']) {
    t.match(text, `\n  ${task}:\n    provider: main\n    model: "splash/tiny-chat"\n`, `the ${task} side task runs on the served model`)
  }
  t.match(hermesConfigYaml(target()), /api_key: "no-key-required"/)
  t.equal(statSync(path.join(home, 'config.yaml')).mode & 0o777, 0o600, 'owner-only file (it may hold the key)')
  t.equal(hermes.minContext, HERMES_MIN_CONTEXT)
})

t.test('each agent needs a window; a smaller one is refused with the real numbers and the way out', async t => {
  t.same([claude, codex, opencode, hermes].map(a => a.minContext), [65536, 32768, 32768, 64000])
  for (const agent of [claude, codex, opencode, hermes]) {
    t.doesNotThrow(() => checkContext(agent, target({contextWindow: agent.minContext})), agent.name)
  }
  // the package could serve more: restart with a larger --max-context
  t.throws(() => checkContext(hermes, target({contextWindow: 32768, packageContextWindow: 131072})), {
    code: 'context_too_small',
    message: 'Hermes Agent needs a context window of at least 64,000 tokens (it refuses models with a smaller window), and the server on http://127.0.0.1:8123 serves 32,768: restart it with `--max-context 64000` or more (splash/tiny-chat supports up to 131,072)',
  })
  // the package cannot: serve another one
  t.throws(() => checkContext(claude, target({contextWindow: 4096, packageContextWindow: 4096})), {
    message: /^Claude Code needs a context window of at least 65,536 tokens \(.+\), and splash\/tiny-chat supports at most 4,096: serve a package with a longer window \(`splash serve --model <package>`\)$/,
  })
  t.throws(() => checkContext(codex, target({contextWindow: 16384})), {message: /serves 16,384: restart it with `--max-context 32K` or more$/})
})

t.test('agents are found on PATH first, then in the project folders, then under HOME', async t => {
  const root = tmpData(t)
  const dirs = projectAgentDirs(root)
  t.same(dirs, [path.join(root, 'node_modules', '.bin'), path.join(root, '.agents', 'bin')])
  const make = (dir: string) => {
    mkdirSync(dir, {recursive: true})
    const file = path.join(dir, 'opencode')
    writeFileSync(file, '#!/bin/sh\n')
    chmodSync(file, 0o755)
    return file
  }
  const home = path.join(root, 'home')
  const atHome = make(path.join(home, '.local', 'bin'))
  const env = {PATH: path.join(root, 'empty'), HOME: home}
  t.equal(findExecutable('opencode', env, ['.local/bin/opencode'], dirs), atHome)
  const installed = make(dirs[1])
  t.equal(findExecutable('opencode', env, ['.local/bin/opencode'], dirs), installed, '.agents/bin before HOME')
  const local = make(dirs[0])
  t.equal(findExecutable('opencode', env, [], dirs), local, 'node_modules/.bin before .agents/bin')
  const onPath = make(path.join(root, 'path'))
  t.equal(findExecutable('opencode', {...env, PATH: path.join(root, 'path')}, [], dirs), onPath, 'PATH first')
  t.equal(findExecutable('opencode', env, [], []), undefined)
  // this checkout's own folders: npm ci puts the pinned Claude Code and Codex into node_modules/.bin
  t.equal(path.basename(path.dirname(projectAgentDirs()[0])), 'node_modules')
})

t.test('every launcher states a minimum version, its reason, and how to install and update', async t => {
  for (const agent of [claude, codex, opencode, hermes]) {
    t.match(agent.minVersion, /^\d+\.\d+\.\d+$/, agent.name)
    t.ok(agent.minVersionReason.length > 10, `${agent.name} says why`)
    t.match(agent.install, /^(npm install -g|pip install) /)
    t.match(agent.update, /^(npm install -g|pip install --upgrade) /)
  }
})
