// The launchers against the real `splash serve` with a real model package (tiny synthetic) and fake agents on
// PATH: each agent gets what it needs to reach the served model, the user's arguments arrive unchanged after
// the launcher's own, the agent's exit code (or signal) becomes Splash's, termination signals are forwarded,
// and nothing is written outside the data directory.
import t from 'tap'
import type {Test} from 'tap'
import {readFileSync} from 'node:fs'
import path from 'node:path'
import {
  installFake,
  listFiles,
  makeSandbox,
  readRecord,
  runSplash,
  sandboxEnv,
  spawnSplash,
  FAKE_CODEX_INSTRUCTIONS,
  waitForFile,
  type AgentName,
  type AgentRecord,
  type Sandbox,
} from '../agents/fake-agents.js'
import {serveTinyModel} from '../agents/served-model.js'

const KEY = 'launcher-test-key'
const served: Awaited<ReturnType<typeof serveTinyModel>> & {reasoningEfforts?: string[]; reasoningDefault?: string} = await serveTinyModel({apiKey: KEY})
t.teardown(() => served.stop())
const {server, model, contextWindow} = served
const listed = (await (await fetch(`${server.url}/v1/models`, {headers: {authorization: `Bearer ${KEY}`}})).json()) as {data: Array<{reasoning_efforts: string[]; reasoning_effort_default: string}>}
Object.assign(served, {reasoningEfforts: listed.data[0].reasoning_efforts, reasoningDefault: listed.data[0].reasoning_effort_default})
const v1 = `${server.url}/v1`
const output = Math.max(256, Math.min(32768, Math.floor(contextWindow / 4)))

// Arguments a user might give: unknown flags, values with spaces, a "--" in the middle; all must arrive as-is.
const USER_ARGS = ['--weird-flag', 'value', '-x', 'two words', '--', '--help', '']

interface Run {
  code: number | null
  record: AgentRecord
  sb: Sandbox
}

async function launch(t: Test, agent: AgentName, extraEnv: Record<string, string> = {}): Promise<Run> {
  const sb = makeSandbox()
  t.teardown(sb.cleanup)
  installFake(sb, agent)
  const env = sandboxEnv(sb, {SPLASH_PORT: String(server.port), SPLASH_API_KEY: KEY, FAKE_AGENT_EXIT: '3', ...extraEnv})
  const res = await runSplash([agent, ...USER_ARGS], env, sb.work)
  t.equal(res.stderr, '', 'no complaint from splash')
  return {code: res.code, record: readRecord(sb), sb}
}

/** Files in the sandbox other than its fixtures: everything the run created outside the record. */
function createdOutsideData(sb: Sandbox): string[] {
  return listFiles(sb.root).filter(f => !f.startsWith('bin/') && !f.startsWith('records/') && f !== 'fake-agent.mjs' && !f.startsWith('data/'))
}

t.test(`the tiny package is served (${model}, window ${contextWindow})`, async t => {
  t.ok(contextWindow >= 64000, 'window meets every agent floor')
})

t.test('claude: environment only, every slot on the served model, real window, args unchanged', async t => {
  const {code, record, sb} = await launch(t, 'claude', {
    ANTHROPIC_API_KEY: 'sk-ant-users-own',
    CLAUDE_CODE_USE_BEDROCK: '1',
    MY_OWN_SETTING: 'kept',
  })
  t.equal(code, 3, "the agent's exit code")
  t.same(record.argv, USER_ARGS)
  const e = record.env
  t.equal(e.ANTHROPIC_BASE_URL, server.url, 'origin, no /v1')
  t.equal(e.ANTHROPIC_AUTH_TOKEN, KEY)
  t.equal(e.ANTHROPIC_API_KEY, '', "the user's own key is not passed on")
  for (const k of ['ANTHROPIC_MODEL', 'ANTHROPIC_DEFAULT_OPUS_MODEL', 'ANTHROPIC_DEFAULT_SONNET_MODEL', 'ANTHROPIC_DEFAULT_HAIKU_MODEL', 'ANTHROPIC_DEFAULT_FABLE_MODEL', 'CLAUDE_CODE_SUBAGENT_MODEL', 'ANTHROPIC_SMALL_FAST_MODEL', 'CLAUDE_CODE_BG_CLASSIFIER_MODEL', 'CLAUDE_CODE_AUTO_MODE_MODEL']) {
    t.equal(e[k], model, k)
  }
  t.equal(e.CLAUDE_CODE_MAX_CONTEXT_TOKENS, String(contextWindow))
  t.equal(e.CLAUDE_CODE_AUTO_COMPACT_WINDOW, String(contextWindow))
  t.equal(e.CLAUDE_CODE_MAX_OUTPUT_TOKENS, String(output))
  t.equal(e.CLAUDE_CODE_ATTRIBUTION_HEADER, '0')
  t.equal(e.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, '1')
  t.notOk('CLAUDE_CODE_USE_BEDROCK' in e, 'a cloud-provider switch is removed')
  t.equal(e.MY_OWN_SETTING, 'kept', 'the rest of the environment passes through')
  t.equal(record.cwd, sb.work, 'runs in the current directory')
  t.same(listFiles(sb.data), [], 'Claude Code needs no files')
  t.same(createdOutsideData(sb), [], 'nothing written elsewhere (HOME, working directory)')
})

t.test('codex: a responses provider and the model catalog through -c overrides, args unchanged', async t => {
  const {code, record, sb} = await launch(t, 'codex')
  t.equal(code, 3)
  const catalogPath = path.join(sb.data, 'agents', 'codex', 'model-catalog.json')
  const overrides = [
    `model_providers.splash.name="Splash"`,
    `model_providers.splash.base_url=${JSON.stringify(v1)}`,
    `model_providers.splash.wire_api="responses"`,
    `model_providers.splash.env_key="SPLASH_AGENT_API_KEY"`,
    `model_provider="splash"`,
    `model=${JSON.stringify(model)}`,
    `review_model=${JSON.stringify(model)}`,
    `model_catalog_json=${JSON.stringify(catalogPath)}`,
    `model_context_window=${contextWindow}`,
    `model_reasoning_effort=${JSON.stringify(served.reasoningDefault)}`,
  ].flatMap(o => ['-c', o])
  t.same(record.argv, [...overrides, ...USER_ARGS], 'overrides first, then the user’s arguments untouched')
  t.equal(record.env.SPLASH_AGENT_API_KEY, KEY, 'the key, in the variable env_key names')
  const catalog = JSON.parse(record.files.codexCatalog!.text!) as {models: Array<Record<string, unknown>>}
  t.equal(catalog.models.length, 1)
  const entry = catalog.models[0]
  t.equal(entry.slug, model)
  t.equal(entry.context_window, contextWindow)
  t.equal(entry.apply_patch_tool_type, 'freeform')
  t.equal(entry.base_instructions, FAKE_CODEX_INSTRUCTIONS, "the installed Codex's own instructions")
  t.equal(entry.default_reasoning_level, served.reasoningDefault, "the package's default effort")
  t.same((entry.supported_reasoning_levels as Array<{effort: string}>).map(l => l.effort), served.reasoningEfforts, "the package's efforts")
  t.same(entry.input_modalities, ['text'], 'the tiny package takes no images')
  t.same(listFiles(sb.data), ['agents/codex/model-catalog.json'])
  t.same(createdOutsideData(sb), [])
})

t.test('opencode: OPENCODE_CONFIG_CONTENT with the openai-compatible provider, args unchanged', async t => {
  const {code, record, sb} = await launch(t, 'opencode')
  t.equal(code, 3)
  t.same(record.argv, USER_ARGS)
  const config = JSON.parse(record.env.OPENCODE_CONFIG_CONTENT) as Record<string, any>
  const provider = config.provider.splash
  t.equal(provider.npm, '@ai-sdk/openai-compatible')
  t.equal(provider.options.baseURL, v1)
  t.equal(provider.options.apiKey, KEY)
  t.same(provider.models[model].limit, {context: contextWindow, output})
  t.equal(provider.models[model].tool_call, true)
  t.equal(provider.models[model].reasoning, true)
  t.equal(config.model, `splash/${model}`)
  t.same(listFiles(sb.data), [], 'opencode needs no files')
  t.same(createdOutsideData(sb), [])
})

t.test('hermes: HERMES_HOME in the data directory with a custom provider config, args unchanged', async t => {
  const {code, record, sb} = await launch(t, 'hermes')
  t.equal(code, 3)
  t.same(record.argv, USER_ARGS)
  const home = path.join(sb.data, 'agents', 'hermes')
  t.equal(record.env.HERMES_HOME, home)
  const text = record.files.hermesConfig!.text!
  t.match(text, '  provider: custom\n')
  t.match(text, `  default: ${JSON.stringify(model)}\n`)
  t.match(text, `  base_url: ${JSON.stringify(v1)}\n`)
  t.match(text, `  api_key: ${JSON.stringify(KEY)}\n`)
  t.match(text, '  api_mode: chat_completions\n')
  t.match(text, `  context_length: ${contextWindow}\n`)
  t.equal(readFileSync(path.join(home, 'config.yaml'), 'utf8'), text)
  t.same(listFiles(sb.data), ['agents/hermes/config.yaml'])
  t.same(createdOutsideData(sb), [], "the user's ~/.hermes is not touched")
})

t.test('exit codes: 0 stays 0; an agent killed by a signal gives 128 + its number', async t => {
  const ok = await launch(t, 'opencode', {FAKE_AGENT_EXIT: '0'})
  t.equal(ok.code, 0)
  const killed = await launch(t, 'claude', {FAKE_AGENT_KILL_SELF: 'SIGKILL'})
  t.equal(killed.code, 128 + 9)
})

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  t.test(`${signal} to splash reaches the agent, whose exit code is returned`, async t => {
    const sb = makeSandbox()
    t.teardown(sb.cleanup)
    installFake(sb, 'codex')
    const env = sandboxEnv(sb, {SPLASH_PORT: String(server.port), SPLASH_API_KEY: KEY, FAKE_AGENT_WAIT: '1', FAKE_AGENT_EXIT: '42'})
    const child = spawnSplash(['codex', 'exec', 'long task'], env, sb.work)
    let stderr = ''
    child.stderr?.on('data', d => (stderr += d))
    const exited = new Promise<number | null>(r => child.on('close', code => r(code)))
    await waitForFile(sb.record)
    child.kill(signal)
    t.equal(await exited, 42, `splash exits with the agent's code ${stderr}`)
    t.same(readRecord(sb).signals, [signal], 'the agent received the signal once')
  })
}
