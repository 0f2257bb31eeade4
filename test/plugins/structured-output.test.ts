// Structured output end to end: the real server on the random synthetic package (whatever the weights
// say, the grammar alone must make the output valid) with the official SDKs, through Chat Completions,
// Responses and Messages, streaming and not: every bounded schema's answer ends and validates with
// ajv; forced tool calls give schema-valid arguments in all three APIs; unsupported keywords get 400
// in each API's own error shape.
import t from 'tap'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import type {ServerProcess} from '../helpers/cli.js'
import {synthFixture} from '../helpers/packages.js'
import {invalidity} from '../helpers/ajv.js'
import {SCHEMAS, UNSUPPORTED} from '../helpers/schemas.js'
import {ask, serveWithClients, type Api, type Clients} from '../helpers/structured-clients.js'

let server: ServerProcess
let c: Clients
let stop: () => Promise<void>

t.before(async () => {
  ;({server, c, stop} = await serveWithClients(await synthFixture('tiny-hybrid', 'q4')))
})
t.teardown(() => stop())

const APIS: Api[] = ['chat', 'responses', 'messages']
const bounded = SCHEMAS.filter(s => s.bounded)

t.test(`${bounded.length} bounded schemas × 3 APIs × streaming and not: every answer ends and validates`, async t => {
  t.ok(bounded.length >= 45)
  let n = 0
  for (const [i, s] of bounded.entries()) {
    for (const api of APIS) {
      for (const stream of [false, true]) {
        const a = await ask(c, api, {prompt: `Give me ${s.name} as JSON`, schema: s.schema, stream, maxTokens: 160, temperature: 1, seed: i})
        n++
        if (!a.ended) t.fail(`${api} ${stream ? 'stream' : 'plain'} ${s.name}: cut off: ${a.text}`)
        const bad = invalidity(s.schema, a.text)
        if (bad) t.fail(`${api} ${stream ? 'stream' : 'plain'} ${s.name}: ${bad}`)
      }
    }
  }
  t.equal(n, bounded.length * 6)
})

t.test('json_object (chat and responses) gives a JSON object', async t => {
  for (const api of ['chat', 'responses'] as const) {
    for (const stream of [false, true]) {
      // free keys and values: the random model may run out of tokens; what it ended must be an object
      const a = await ask(c, api, {prompt: 'json please', stream, maxTokens: 200, temperature: 1, seed: 3})
      if (a.ended) t.notOk(invalidity({type: 'object'}, a.text), `${api} ${stream}`)
      else t.match(a.text, /^\{/, `${api} ${stream}: an object is under way`)
    }
  }
})

t.test("ignore_eos with a schema: the grammar's end still ends the answer (no error, no cut)", async t => {
  // ignore_eos takes the package's stop tokens out of the request; once the value is complete the grammar allows
  // only a stop token, and taking it must end the generation (XGrammar aborts if asked for a mask after it)
  for (const stream of [false, true]) {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {'content-type': 'application/json'},
      body: JSON.stringify({
        messages: [{role: 'user', content: 'yes or no?'}], max_tokens: 60, temperature: 1, seed: 5, ignore_eos: true, stream,
        response_format: {type: 'json_schema', json_schema: {name: 'answer', schema: {type: 'boolean'}}},
      }),
    })
    t.equal(res.status, 200, `stream ${stream}: 200`)
    const text = await res.text()
    let content = '', finish = ''
    if (stream) {
      for (const line of text.split('\n').filter(l => l.startsWith('data: {'))) {
        const choice = JSON.parse(line.slice(6)).choices?.[0]
        content += choice?.delta?.content ?? ''
        finish = choice?.finish_reason ?? finish
      }
    } else {
      const body = JSON.parse(text)
      content = body.choices[0].message.content
      finish = body.choices[0].finish_reason
    }
    t.match(content, /^(true|false)$/, `stream ${stream}: a boolean, nothing after it`)
    t.equal(finish, 'stop', `stream ${stream}: finish_reason stop`)
  }
})

const toolSchema = SCHEMAS.find(s => s.name === 'nested objects')!.schema
const tupleTool = SCHEMAS.find(s => s.name === 'object with array field')!.schema

t.test('forced tool calls give schema-valid arguments (chat required / named, responses required, messages any / tool)', async t => {
  const openaiTools = [
    {type: 'function' as const, function: {name: 'save_user', parameters: toolSchema}},
    {type: 'function' as const, function: {name: 'tag', parameters: tupleTool}},
  ]
  const schemaOf = (name: string) => (name === 'save_user' ? toolSchema : tupleTool)
  for (const choice of ['required', {type: 'function' as const, function: {name: 'tag'}}] as const) {
    for (const stream of [false, true]) {
      // one call: with parallel calls allowed a random model goes on calling until the token limit
      const body = {model: c.model, messages: [{role: 'user' as const, content: 'do it'}], tools: openaiTools, tool_choice: choice, parallel_tool_calls: false, max_tokens: 200, temperature: 1, seed: 5}
      let calls: Array<{name: string; arguments: string}> = []
      let finish: string | null = null
      if (stream) {
        const acc = new Map<number, {name: string; arguments: string}>()
        for await (const ch of await c.openai.chat.completions.create({...body, stream: true})) {
          for (const d of ch.choices[0]?.delta.tool_calls ?? []) {
            const cur = acc.get(d.index) ?? {name: '', arguments: ''}
            cur.name += d.function?.name ?? ''
            cur.arguments += d.function?.arguments ?? ''
            acc.set(d.index, cur)
          }
          finish = ch.choices[0]?.finish_reason ?? finish
        }
        calls = [...acc.values()]
      } else {
        const r = await c.openai.chat.completions.create(body)
        finish = r.choices[0]!.finish_reason
        calls = (r.choices[0]!.message.tool_calls ?? []).map(x => (x.type === 'function' ? x.function : {name: '', arguments: ''}))
      }
      t.equal(finish, 'tool_calls', `chat ${JSON.stringify(choice)} ${stream}`)
      t.ok(calls.length >= 1)
      if (typeof choice === 'object') t.equal(calls[0]!.name, 'tag')
      for (const call of calls) t.notOk(invalidity(schemaOf(call.name), call.arguments), `chat ${call.name}: ${call.arguments}`)
    }
  }

  const r = await c.openai.responses.create({
    model: c.model,
    input: 'do it',
    tools: [{type: 'function', name: 'save_user', parameters: toolSchema, strict: true}],
    tool_choice: 'required',
    parallel_tool_calls: false,
    max_output_tokens: 200,
  })
  const call = r.output.find(i => i.type === 'function_call')
  t.ok(call, 'responses: a function_call item')
  if (call?.type === 'function_call') t.notOk(invalidity(toolSchema, call.arguments), `responses: ${call.arguments}`)

  for (const choice of [{type: 'any' as const, disable_parallel_tool_use: true}, {type: 'tool' as const, name: 'tag'}]) {
    const m = await c.anthropic.messages
      .stream({
        model: c.model,
        max_tokens: 200,
        messages: [{role: 'user', content: 'do it'}],
        tools: [
          {name: 'save_user', input_schema: toolSchema as Anthropic.Tool.InputSchema},
          {name: 'tag', input_schema: tupleTool as Anthropic.Tool.InputSchema},
        ],
        tool_choice: choice,
      })
      .finalMessage()
    t.equal(m.stop_reason, 'tool_use', `messages ${choice.type}`)
    const uses = m.content.filter(b => b.type === 'tool_use')
    t.ok(uses.length >= 1)
    for (const u of uses) if (u.type === 'tool_use') t.notOk(invalidity(schemaOf(u.name), JSON.stringify(u.input)), `messages ${u.name}: ${JSON.stringify(u.input)}`)
  }
})

t.test('unsupported schema keywords: 400 naming the keyword, in each API', async t => {
  for (const {schema, keyword} of UNSUPPORTED.slice(0, 6)) {
    for (const api of APIS) {
      try {
        await ask(c, api, {prompt: 'x', schema, stream: false, maxTokens: 5, temperature: 0})
        t.fail(`${api} accepted ${JSON.stringify(schema)}`)
      } catch (e) {
        const err = e as InstanceType<typeof OpenAI.APIError> | InstanceType<typeof Anthropic.APIError>
        t.equal(err.status, 400, `${api} ${keyword}`)
        t.match(err.message, keyword)
      }
    }
  }
  // a strict tool and a forced tool are held to their schema too
  await t.rejects(
    c.openai.chat.completions.create({
      model: c.model,
      messages: [{role: 'user', content: 'x'}],
      tools: [{type: 'function', function: {name: 'f', strict: true, parameters: {type: 'object', properties: {a: {type: 'array', uniqueItems: true}}}}}],
      max_tokens: 5,
    }),
    {status: 400, message: /uniqueItems/},
  )
  await t.rejects(
    c.anthropic.messages.create({
      model: c.model,
      max_tokens: 5,
      messages: [{role: 'user', content: 'x'}],
      tools: [{name: 'f', input_schema: {type: 'object', properties: {n: {type: 'integer', multipleOf: 2}}}}],
      tool_choice: {type: 'any'},
    }),
    {status: 400, message: /multipleOf/},
  )
  // schemas past what the grammar engine compiles in reasonable time (it compiles on the serving thread): too deep,
  // too many subschemas in one schema, or in the tool schemas enforced together
  const props = (n: number, prefix: string) => ({type: 'object', properties: Object.fromEntries(Array.from({length: n}, (_, i) => [`${prefix}${i}`, {type: 'integer'}]))})
  let deep: Record<string, unknown> = {type: 'integer'}
  for (let i = 0; i < 40; i++) deep = {type: 'array', items: deep}
  for (const [schema, why] of [[deep, /nested more than/], [props(600, 'p'), /more than 512 subschemas/]] as const) {
    for (const api of APIS) {
      await t.rejects(ask(c, api, {prompt: 'x', schema, stream: false, maxTokens: 5, temperature: 0}), {status: 400, message: why}, `${api}: ${why}`)
    }
  }
  await t.rejects(
    c.openai.chat.completions.create({
      model: c.model,
      messages: [{role: 'user', content: 'x'}],
      tools: ['a', 'b', 'c'].map(name => ({type: 'function' as const, function: {name, parameters: props(200, name)}})),
      tool_choice: 'required',
      max_tokens: 5,
    }),
    {status: 400, message: /tool schemas enforced together hold 603 subschemas/},
  )
  // the server is still serving
  const a = await ask(c, 'chat', {prompt: 'x', schema: {type: 'boolean'}, stream: false, maxTokens: 5, temperature: 0})
  t.match(a.text, /^(true|false)$/)
})
