// Forced tool calls within max_tokens, end to end on the random synthetic package (its free string values never end
// by themselves): Chat Completions (tool_choice required / named), Responses (required / named) and Messages (any /
// tool), streaming and not, greedy and sampled. Under a max_tokens too small for the natural answer but large enough
// for the shortest call, the call is closed: it parses, its arguments validate, and the API says the budget decided
// (length / incomplete: max_output_tokens / max_tokens); of several tools the one whose call fits is called. Below
// the shortest call: a 400 max_tokens_too_small in the API's own shape, before any work. With plenty of max_tokens a
// call that ends by itself is left alone.
import t, {type Test} from 'tap'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import {synthFixture} from '../helpers/packages.js'
import {invalidity} from '../helpers/ajv.js'
import {serveWithClients, type Api, type Clients} from '../helpers/structured-clients.js'

let c: Clients
let stop: () => Promise<void>

t.before(async () => {
  ;({c, stop} = await serveWithClients(await synthFixture('tiny-hybrid', 'q4')))
})
t.teardown(() => stop())

type Schema = Record<string, unknown>
interface Tool {
  name: string
  schema: Schema
}
interface Call {
  name: string
  arguments: string
  /** Responses: the function_call item's status. */
  status?: string
}
interface Forced {
  calls: Call[]
  /** finish_reason / status (and incomplete reason) / stop_reason. */
  finish: string
  outputTokens: number
  tokenIds?: number[]
}
interface Ask {
  tools: Tool[]
  /** A tool's name, or undefined for "any of them" (required / any). */
  name?: string
  maxTokens: number
  stream: boolean
  temperature: number
  seed?: number
  /** false: one call at most (parallel_tool_calls / disable_parallel_tool_use). */
  parallel?: boolean
}

/** A forced call through one API's SDK. */
async function forced(api: Api, q: Ask): Promise<Forced> {
  if (api === 'chat') {
    const body = {
      model: c.model,
      messages: [{role: 'user' as const, content: 'call it'}],
      tools: q.tools.map(x => ({type: 'function' as const, function: {name: x.name, parameters: x.schema}})),
      tool_choice: q.name ? {type: 'function' as const, function: {name: q.name}} : ('required' as const),
      ...(q.parallel === false ? {parallel_tool_calls: false} : {}),
      max_tokens: q.maxTokens,
      temperature: q.temperature,
      seed: q.seed,
    }
    if (!q.stream) {
      const r = await c.openai.chat.completions.create({...body, return_token_ids: true} as typeof body)
      const ch = r.choices[0]!
      const calls = (ch.message.tool_calls ?? []).map(x => (x.type === 'function' ? {name: x.function.name, arguments: x.function.arguments} : {name: '', arguments: ''}))
      return {calls, finish: ch.finish_reason, outputTokens: r.usage!.completion_tokens, tokenIds: (ch as unknown as {token_ids: number[]}).token_ids}
    }
    const acc = new Map<number, Call>()
    let finish = ''
    let outputTokens = -1
    for await (const chunk of await c.openai.chat.completions.create({...body, stream: true, stream_options: {include_usage: true}})) {
      for (const d of chunk.choices[0]?.delta.tool_calls ?? []) {
        const cur = acc.get(d.index) ?? {name: '', arguments: ''}
        cur.name += d.function?.name ?? ''
        cur.arguments += d.function?.arguments ?? ''
        acc.set(d.index, cur)
      }
      finish = chunk.choices[0]?.finish_reason ?? finish
      if (chunk.usage) outputTokens = chunk.usage.completion_tokens
    }
    return {calls: [...acc.values()], finish, outputTokens}
  }
  if (api === 'responses') {
    const body = {
      model: c.model,
      input: 'call it',
      tools: q.tools.map(x => ({type: 'function' as const, name: x.name, parameters: x.schema, strict: true})),
      tool_choice: q.name ? {type: 'function' as const, name: q.name} : ('required' as const),
      ...(q.parallel === false ? {parallel_tool_calls: false} : {}),
      max_output_tokens: q.maxTokens,
      temperature: q.temperature,
    }
    const r = q.stream ? await c.openai.responses.stream(body).finalResponse() : await c.openai.responses.create(body)
    const calls = r.output.flatMap(i => (i.type === 'function_call' ? [{name: i.name, arguments: i.arguments, status: i.status}] : []))
    return {calls, finish: r.status === 'incomplete' ? `incomplete: ${r.incomplete_details?.reason}` : String(r.status), outputTokens: r.usage!.output_tokens}
  }
  const body = {
    model: c.model,
    max_tokens: q.maxTokens,
    temperature: q.temperature,
    messages: [{role: 'user' as const, content: 'call it'}],
    tools: q.tools.map(x => ({name: x.name, input_schema: x.schema as Anthropic.Tool.InputSchema})),
    tool_choice: q.name ? {type: 'tool' as const, name: q.name} : {type: 'any' as const, ...(q.parallel === false ? {disable_parallel_tool_use: true} : {})},
  }
  const m = q.stream ? await c.anthropic.messages.stream(body).finalMessage() : await c.anthropic.messages.create(body)
  const calls = m.content.flatMap(b => (b.type === 'tool_use' ? [{name: b.name, arguments: JSON.stringify(b.input)}] : []))
  return {calls, finish: String(m.stop_reason), outputTokens: m.usage.output_tokens}
}

const APIS: Api[] = ['chat', 'responses', 'messages']
const CUT: Record<Api, string> = {chat: 'length', responses: 'incomplete: max_output_tokens', messages: 'max_tokens'}
const ENDED: Record<Api, string> = {chat: 'tool_calls', responses: 'completed', messages: 'tool_use'}

// a free string the random model never ends, a number, an optional enum and an optional object: only a close ends it
const edit: Tool = {
  name: 'edit_file',
  schema: {
    type: 'object',
    properties: {path: {type: 'string'}, line: {type: 'integer'}, mode: {enum: ['replace', 'insert']}, opts: {type: 'object', properties: {dry: {type: 'boolean'}}}},
    required: ['path', 'line'],
  },
}
// a much longer shortest call
const report: Tool = {
  name: 'write_report',
  schema: {type: 'object', properties: {title: {type: 'string', minLength: 60}, scores: {type: 'array', items: {type: 'integer'}, minItems: 12}}, required: ['title', 'scores']},
}

function check(t: Test, where: string, a: Forced, tools: Tool[]): void {
  t.ok(a.calls.length >= 1, `${where}: a call`)
  for (const call of a.calls) {
    const tool = tools.find(x => x.name === call.name)
    if (!tool) {
      t.fail(`${where}: a call of ${JSON.stringify(call.name)}`)
      continue
    }
    const bad = invalidity(tool.schema, call.arguments)
    if (bad) t.fail(`${where}: ${bad} in ${call.arguments}`)
    if (call.status !== undefined) t.equal(call.status, 'completed', `${where}: the call item is complete`)
  }
}

/** The shortest call's length, as the 400 says it. */
async function shortest(tools: Tool[], name?: string): Promise<number> {
  const err = await forced('chat', {tools, name, maxTokens: 1, stream: false, temperature: 0}).then(
    () => undefined,
    (e: {status: number; message: string}) => e,
  )
  const need = /takes (\d+) tokens/.exec(err?.message ?? '')?.[1]
  if (err?.status !== 400 || need === undefined) throw new Error(`no 400 for max_tokens 1: ${err?.message}`)
  return Number(need)
}

t.test('a max_tokens the natural answer overruns: the forced call is closed, parses and validates, and says length', async t => {
  const need = await shortest([edit])
  let n = 0
  for (const api of APIS) {
    for (const [i, extra] of [0, 3, 17, 60].entries()) {
      for (const name of [edit.name, undefined]) {
        const stream = (i + (name ? 1 : 0)) % 2 === 1
        const temperature = i % 2 === 0 ? 0 : 1
        const maxTokens = need + extra
        const where = `${api} ${name ? 'named' : 'any'} ${stream ? 'stream' : 'plain'} T=${temperature} max ${maxTokens}`
        const a = await forced(api, {tools: [edit], name, maxTokens, stream, temperature, seed: i})
        check(t, where, a, [edit])
        t.equal(a.calls.length, 1, `${where}: one call`)
        t.equal(a.finish, CUT[api], `${where}: the budget decided`)
        t.ok(a.outputTokens <= maxTokens, `${where}: ${a.outputTokens} tokens`)
        n++
      }
    }
  }
  t.equal(n, 24)
})

t.test('of several tools, the one whose call fits the budget is called', async t => {
  const both = [report, edit]
  const need = await shortest(both)
  t.equal(need, await shortest([edit]), 'the shortest call of any of them is the shortest call of edit_file')
  t.ok((await shortest([report])) > need + 40, 'write_report takes far more')
  for (const api of APIS) {
    for (const stream of [false, true]) {
      const maxTokens = need + 10
      const a = await forced(api, {tools: both, maxTokens, stream, temperature: 1, seed: 3})
      const where = `${api} ${stream ? 'stream' : 'plain'} max ${maxTokens}`
      check(t, where, a, both)
      t.same(
        a.calls.map(x => x.name),
        ['edit_file'],
        `${where}: edit_file`,
      )
      t.equal(a.finish, CUT[api], `${where}: the budget decided`)
    }
  }
})

t.test('a max_tokens below the shortest call is a 400 in the API’s own shape, before any work', async t => {
  const need = await shortest([edit])
  for (const api of APIS) {
    for (const stream of [false, true]) {
      for (const name of [edit.name, undefined]) {
        const where = `${api} ${stream ? 'stream' : 'plain'} ${name ? 'named' : 'any'}`
        const err = await forced(api, {tools: [edit], name, maxTokens: need - 1, stream, temperature: 0}).then(
          () => undefined,
          (e: unknown) => e,
        )
        // each API names its own field
        const field = api === 'responses' ? 'max_output_tokens' : 'max_tokens'
        const message = new RegExp(`${field} is ${need - 1}, but the shortest call of "edit_file" takes ${need} tokens`)
        if (api === 'messages') {
          const e = err as InstanceType<typeof Anthropic.APIError> | undefined
          t.equal(e?.status, 400, `${where}: 400`)
          const body = e?.error as {type: string; error: {type: string; message: string}} | undefined
          t.equal(body?.type, 'error', `${where}: Anthropic's envelope`)
          t.equal(body?.error.type, 'invalid_request_error')
          t.match(body?.error.message, message)
        } else {
          const e = err as InstanceType<typeof OpenAI.APIError> | undefined
          t.equal(e?.status, 400, `${where}: 400`)
          t.equal(e?.code, 'max_tokens_too_small', `${where}: code`)
          t.equal(e?.param, field, `${where}: param`)
          t.match(e?.message, message)
        }
      }
    }
  }
  // several tools: the message names no one tool
  await t.rejects(forced('chat', {tools: [report, edit], maxTokens: need - 1, stream: false, temperature: 0}), {
    status: 400,
    message: new RegExp(`the shortest call of any of the tools takes ${need} tokens`),
  })
  // the server goes on serving
  check(t, 'after the 400s', await forced('chat', {tools: [edit], maxTokens: need + 5, stream: false, temperature: 0}), [edit])
})

t.test('plenty of max_tokens: a call that ends by itself is left as it was; parallel calls each complete', async t => {
  // bounded values only (enum strings, a boolean, a small integer): the random model's call ends by itself
  const pick: Tool = {
    name: 'pick',
    schema: {type: 'object', properties: {color: {enum: ['red', 'green', 'blue']}, ok: {type: 'boolean'}, n: {type: 'integer', minimum: 0, maximum: 9}}, required: ['color', 'ok', 'n']},
  }
  for (const api of APIS) {
    for (const name of [pick.name, undefined]) {
      const where = `${api} ${name ? 'named' : 'any, one call'}`
      const a = await forced(api, {tools: [pick], name, parallel: false, maxTokens: 400, stream: false, temperature: 0})
      const b = await forced(api, {tools: [pick], name, parallel: false, maxTokens: 4000, stream: false, temperature: 0})
      check(t, where, a, [pick])
      t.equal(a.calls.length, 1, `${where}: one call`)
      t.equal(a.finish, ENDED[api], `${where}: ended by itself`)
      t.same(a, b, `${where}: the same answer under a budget ten times larger`)
    }
  }
  // the greedy tokens themselves, streamed or not
  const plain = await forced('chat', {tools: [pick], parallel: false, maxTokens: 400, stream: false, temperature: 0})
  const streamed = await forced('chat', {tools: [pick], parallel: false, maxTokens: 400, stream: true, temperature: 0})
  t.same(streamed.calls, plain.calls)
  t.equal(plain.tokenIds?.length, plain.outputTokens, 'token ids returned')
  // parallel calls allowed: the random model calls on until the budget, which lets no call start that cannot end
  for (const api of APIS) {
    for (const stream of [false, true]) {
      const where = `${api} any, parallel ${stream ? 'stream' : 'plain'}`
      const a = await forced(api, {tools: [pick], maxTokens: 500, stream, temperature: 0})
      check(t, where, a, [pick])
      t.ok(a.calls.length >= 2, `${where}: ${a.calls.length} calls`)
      t.equal(a.finish, CUT[api], `${where}: the budget decided`)
    }
  }
})
