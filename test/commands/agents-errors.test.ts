// The launchers' one-line refusals, with fake agents on PATH and the real `splash serve` (no model package):
// agent not installed, too old, server not running, no model loaded, API key missing or wrong, a window too small.
import t from 'tap'
import type {Test} from 'tap'
import net from 'node:net'
import {existsSync} from 'node:fs'
import {startServe, type ServerProcess} from '../helpers/cli.js'
import {installFake, listFiles, makeSandbox, runSplash, sandboxEnv, type AgentName} from '../agents/fake-agents.js'
import {prepareLaunch} from '../../src/agents/launch.js'
import {synthFixture} from '../helpers/packages.js'
import {claude} from '../../src/agents/claude.js'
import {codex} from '../../src/agents/codex.js'
import {opencode} from '../../src/agents/opencode.js'

const AGENTS: AgentName[] = ['claude', 'codex', 'opencode', 'hermes']
const INSTALL: Record<AgentName, string> = {
  claude: 'npm install -g @anthropic-ai/claude-code',
  codex: 'npm install -g @openai/codex',
  opencode: 'npm install -g opencode-ai',
  hermes: 'pip install hermes-agent',
}
const NAME: Record<AgentName, string> = {claude: 'Claude Code', codex: 'Codex CLI', opencode: 'opencode', hermes: 'Hermes Agent'}
const MIN: Record<AgentName, string> = {claude: '2.1.193', codex: '0.105.0', opencode: '1.0.0', hermes: '0.6.0'}
const OLD: Record<AgentName, string> = {claude: '2.0.76', codex: '0.98.0', opencode: '0.15.31', hermes: '0.5.9'}

/** A port nothing listens on (bound, then released). */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port
      s.close(() => resolve(port))
    })
  })
}

function oneErrorLine(t: Test, stderr: string): string {
  const lines = stderr.trim().split('\n')
  t.equal(lines.length, 1, `one line on stderr: ${stderr}`)
  t.match(lines[0], /^Error: /)
  return lines[0]
}

const notInstalled = (agent: AgentName) =>
  `${NAME[agent]} is not installed (no \`${agent}\` on PATH, in node_modules/.bin or in .agents/bin): install it with \`${INSTALL[agent]}\``

// Hermes is nowhere in this project (npm ci installs Claude Code and Codex into node_modules/.bin, and npm test
// opencode into .agents/bin), so its launcher shows the message as a user sees it.
t.test('hermes: not installed → how to install it', async t => {
  const sb = makeSandbox()
  t.teardown(sb.cleanup)
  const port = await closedPort()
  const res = await runSplash(['hermes', '--some-flag'], sandboxEnv(sb, {SPLASH_PORT: String(port)}), sb.work)
  t.equal(res.code, 1)
  t.equal(oneErrorLine(t, res.stderr), `Error: ${notInstalled('hermes')}`)
  t.same(listFiles(sb.data), [], 'nothing written')
})

for (const agent of ['claude', 'codex', 'opencode'] as const) {
  t.test(`${agent}: found in the project's own folders when PATH has none`, async t => {
    const sb = makeSandbox()
    t.teardown(sb.cleanup)
    const port = await closedPort()
    const res = await runSplash([agent], sandboxEnv(sb, {SPLASH_PORT: String(port)}), sb.work)
    t.equal(res.code, 1)
    // past the lookup and the version check: the next thing missing is the server
    t.match(oneErrorLine(t, res.stderr), /^Error: No Splash server is answering on /)
  })

  t.test(`${agent}: on PATH nor in the project folders → how to install it`, async t => {
    const sb = makeSandbox()
    t.teardown(sb.cleanup)
    const spec = {claude, codex, opencode}[agent]
    const empty = [sb.binDir]
    await t.rejects(prepareLaunch(spec, sandboxEnv(sb), empty), {code: 'agent_not_installed', message: notInstalled(agent)})
    t.same(listFiles(sb.data), [], 'nothing written')
  })
}

for (const agent of AGENTS) {
  t.test(`${agent}: too old → the minimum, why, and how to update`, async t => {
    const sb = makeSandbox()
    t.teardown(sb.cleanup)
    installFake(sb, agent, OLD[agent])
    const port = await closedPort()
    const res = await runSplash([agent], sandboxEnv(sb, {SPLASH_PORT: String(port)}), sb.work)
    t.equal(res.code, 1)
    const line = oneErrorLine(t, res.stderr)
    t.match(line, `${NAME[agent]} ${OLD[agent]} is too old: Splash needs ${MIN[agent]} or newer (`)
    t.match(line, /\); update with `(npm install -g \S+@latest|pip install --upgrade hermes-agent)`$/)
    t.notOk(existsSync(sb.record), 'the agent was not started')
    t.same(listFiles(sb.data), [], 'nothing written')
  })

  t.test(`${agent}: no server → how to start one`, async t => {
    const sb = makeSandbox()
    t.teardown(sb.cleanup)
    installFake(sb, agent)
    const port = await closedPort()
    const res = await runSplash([agent], sandboxEnv(sb, {SPLASH_PORT: String(port)}), sb.work)
    t.equal(res.code, 1)
    const line = oneErrorLine(t, res.stderr)
    t.equal(
      line,
      `Error: No Splash server is answering on http://127.0.0.1:${port}: start one in another terminal with \`splash serve --model <package> --port ${port}\``,
    )
    t.notOk(existsSync(sb.record), 'the agent was not started')
    t.same(listFiles(sb.data), [], 'nothing written')
  })
}

t.test('the default port is 8000 and the message says how to point elsewhere', async t => {
  const sb = makeSandbox()
  t.teardown(sb.cleanup)
  installFake(sb, 'claude')
  const env = sandboxEnv(sb)
  // Only meaningful when nothing listens on 8000 here.
  const busy = await new Promise<boolean>(resolve => {
    const s = net.connect({host: '127.0.0.1', port: 8000})
    s.once('connect', () => (s.destroy(), resolve(true)))
    s.once('error', () => resolve(false))
  })
  if (busy) {
    t.comment('something listens on 127.0.0.1:8000; checked the SPLASH_PORT wording instead')
    const res = await runSplash(['claude'], {...env, SPLASH_PORT: 'eighty'}, sb.work)
    t.equal(oneErrorLine(t, res.stderr), 'Error: SPLASH_PORT must be a port number between 1 and 65535, got "eighty"')
    return
  }
  const res = await runSplash(['claude'], env, sb.work)
  t.equal(
    oneErrorLine(t, res.stderr),
    'Error: No Splash server is answering on http://127.0.0.1:8000: start one in another terminal with `splash serve --model <package>` (or set SPLASH_PORT to the port it listens on)',
  )
})

t.test('SPLASH_PORT that is not a port', async t => {
  const sb = makeSandbox()
  t.teardown(sb.cleanup)
  installFake(sb, 'codex')
  const res = await runSplash(['codex'], sandboxEnv(sb, {SPLASH_PORT: '70000'}), sb.work)
  t.equal(res.code, 1)
  t.equal(oneErrorLine(t, res.stderr), 'Error: SPLASH_PORT must be a port number between 1 and 65535, got "70000"')
})

t.test('a server without a model: every launcher says so and starts nothing', async t => {
  const server: ServerProcess = await startServe([], {SPLASH_API_KEY: '', SPLASH_DEFAULT_PACKAGE: ''})
  t.teardown(() => {
    server.child.kill('SIGKILL')
  })
  for (const agent of AGENTS) {
    const sb = makeSandbox()
    t.teardown(sb.cleanup)
    installFake(sb, agent)
    const res = await runSplash([agent, 'run', 'hello'], sandboxEnv(sb, {SPLASH_PORT: String(server.port)}), sb.work)
    t.equal(res.code, 1, agent)
    t.equal(
      oneErrorLine(t, res.stderr),
      `Error: The Splash server on ${server.url} has no model loaded: restart it with \`splash serve --model <package> --port ${server.port}\``,
    )
    t.notOk(existsSync(sb.record), `${agent} was not started`)
    t.same(listFiles(sb.data), [], 'nothing written')
  }
})

t.test('a server that needs a key: missing, wrong, right', async t => {
  const server = await startServe(['--api-key', 'the-key'], {SPLASH_API_KEY: '', SPLASH_DEFAULT_PACKAGE: ''})
  t.teardown(() => {
    server.child.kill('SIGKILL')
  })
  const sb = makeSandbox()
  t.teardown(sb.cleanup)
  installFake(sb, 'opencode')
  const env = sandboxEnv(sb, {SPLASH_PORT: String(server.port)})

  const missing = await runSplash(['opencode'], env, sb.work)
  t.equal(missing.code, 1)
  t.equal(
    oneErrorLine(t, missing.stderr),
    `Error: The Splash server on ${server.url} requires an API key: set SPLASH_API_KEY to the key it was started with`,
  )
  const wrong = await runSplash(['opencode'], {...env, SPLASH_API_KEY: 'nope'}, sb.work)
  t.equal(
    oneErrorLine(t, wrong.stderr),
    `Error: The Splash server on ${server.url} rejected the key in SPLASH_API_KEY; set it to the key the server was started with`,
  )
  const right = await runSplash(['opencode'], {...env, SPLASH_API_KEY: 'the-key'}, sb.work)
  t.match(oneErrorLine(t, right.stderr), /has no model loaded/, 'the key was accepted; the server simply has no model')
})

t.test('a served window below what the agent needs: refused before anything starts, with the real numbers', async t => {
  // tiny-hybrid's own window is 4,096 tokens: no agent fits, and no --max-context can help
  const server = await startServe(['--model', await synthFixture('tiny-hybrid', 'q4')], {SPLASH_API_KEY: ''})
  t.teardown(() => {
    server.child.kill('SIGKILL')
  })
  const need: Record<AgentName, string> = {claude: '65,536', codex: '32,768', opencode: '32,768', hermes: '64,000'}
  for (const agent of AGENTS) {
    const sb = makeSandbox()
    t.teardown(sb.cleanup)
    installFake(sb, agent)
    const res = await runSplash([agent], sandboxEnv(sb, {SPLASH_PORT: String(server.port)}), sb.work)
    t.equal(res.code, 1, agent)
    t.match(
      oneErrorLine(t, res.stderr),
      new RegExp(`^Error: ${NAME[agent]} needs a context window of at least ${need[agent]} tokens \\(.+\\), and splash/synth-tiny-hybrid supports at most 4,096: serve a package with a longer window \\(\`splash serve --model <package>\`\\)$`),
    )
    t.notOk(existsSync(sb.record), `${agent} was not started`)
    t.same(listFiles(sb.data), [], 'nothing written')
  }
})
