// Hermes Agent ships only outside the registries these machines reach, so its turn is replayed: the request it sends
// (test/agents/fixtures/hermes-request.json: its identity prompt and file/terminal tool schemas, from its public
// source, MIT licence) goes to `splash serve` on packages/default over Chat Completions, the tool call that comes back
// is carried out here as Hermes would (write_file writes the file, terminal runs the command in the working folder),
// its result goes back, and the model must end the turn with a short text answer. The folder is then checked.
import {execFileSync} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import {root} from '../helpers/cli.js'
import {FILE_TASKS, serveDefaultPackage} from './real-agent.js'
import {listFiles} from './fake-agents.js'

interface ToolCall {
  id: string
  function: {name: string; arguments: string}
}
interface Choice {
  finish_reason: string
  message: {content: string | null; tool_calls?: ToolCall[]}
}

const fixture = JSON.parse(readFileSync(path.join(root, 'test', 'agents', 'fixtures', 'hermes-request.json'), 'utf8')) as {
  messages: Array<Record<string, unknown>>
}

/** Hermes' tools, done for real in `cwd`; returns the tool result text Hermes sends back. */
function runTool(call: ToolCall, cwd: string): string {
  const args = JSON.parse(call.function.arguments) as Record<string, string>
  if (call.function.name === 'write_file') {
    writeFileSync(path.resolve(cwd, args.path), args.content)
    return JSON.stringify({bytes_written: Buffer.byteLength(args.content), dirs_created: false})
  }
  if (call.function.name === 'terminal') {
    const output = execFileSync('/bin/sh', ['-c', args.command], {cwd, encoding: 'utf8'})
    return JSON.stringify({output, exit_code: 0, error: null})
  }
  throw new Error(`unexpected tool ${call.function.name}`)
}

t.test('Hermes Agent requests get Hermes tool calls and a short answer from the default package', {timeout: 900_000}, async t => {
  const served = await serveDefaultPackage()
  t.teardown(() => served.stop())
  const post = async (messages: unknown[]): Promise<Choice> => {
    const res = await fetch(`${served.server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {'content-type': 'application/json'},
      body: JSON.stringify({...fixture, messages, stream: false}),
    })
    t.equal(res.status, 200, 'the request is answered')
    return ((await res.json()) as {choices: Choice[]}).choices[0]!
  }
  for (const task of FILE_TASKS) {
    await t.test(`hermes: ${task.name}: ${task.prompt}`, async t => {
      const work = mkdtempSync(path.join(os.tmpdir(), 'splash-hermes-'))
      t.teardown(() => rmSync(work, {recursive: true, force: true}))
      for (const [f, text] of Object.entries(task.setup ?? {})) writeFileSync(path.join(work, f), text)
      const messages: unknown[] = [fixture.messages[0], {role: 'user', content: task.prompt}]
      const first = await post(messages)
      const call = first.message.tool_calls?.[0]
      t.equal(first.finish_reason, 'tool_calls', `a tool call comes back (${JSON.stringify(first.message).slice(0, 400)})`)
      if (!call) return
      t.ok(['write_file', 'terminal'].includes(call.function.name), `Hermes' own tool: ${call.function.name}`)
      const result = runTool(call, work)
      messages.push({role: 'assistant', content: first.message.content ?? '', tool_calls: [call]}, {role: 'tool', tool_call_id: call.id, content: result})
      const second = await post(messages)
      t.equal(second.finish_reason, 'stop', 'the turn ends with an answer')
      t.ok((second.message.content ?? '').trim().length > 0 && !second.message.tool_calls?.length, `a short text answer: ${JSON.stringify(second.message.content)}`)
      const files = Object.fromEntries(listFiles(work).map(f => [f, readFileSync(path.join(work, f), 'utf8')]))
      t.same(files, task.expect, 'the folder holds exactly the expected files')
    })
  }
})
