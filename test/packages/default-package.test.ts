// The default package that ships in the repo: it verifies, `splash serve` with no --model serves it, it
// answers a chat request with reasoning, and it makes a parseable tool call that strict clients accept.
import t from 'tap'
import OpenAI from 'openai'
import {createOpenAICompatible} from '@ai-sdk/openai-compatible'
import {streamText, jsonSchema, tool} from 'ai'
import {runCli, startServe, root, type ServerProcess} from '../helpers/cli.js'
import {join} from 'node:path'

let server: ServerProcess
let client: OpenAI

const weatherTool = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Get the current weather for a city',
    parameters: {type: 'object', properties: {city: {type: 'string'}}, required: ['city']},
  },
}

t.before(async () => {
  server = await startServe([])
  client = new OpenAI({baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0})
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

t.test('its manifest verifies', async t => {
  const r = await runCli(['package', 'verify', join(root, 'packages', 'default')])
  t.equal(r.code, 0, r.stderr)
})

t.test('serve with no --model serves it', async t => {
  const models = await client.models.list()
  t.equal(models.data[0].id, 'splash/default')
  t.match(server.output(), /Serving splash\/default on cpu \((scalar|avx2|avx512)\)/)
  const metrics = await (await fetch(`${server.url}/metrics`)).text()
  t.match(metrics, /^splash_model_info\{backend="cpu",family="qwen3_5",package="splash\/default",quant="q4",variant="(scalar|avx2|avx512)"\} 1$/m, 'what runs, on what')
})

t.test('answers a chat request, thinking first', async t => {
  const r = await client.chat.completions.create({model: 'splash/default', messages: [{role: 'user', content: 'Explain what a Python list is.'}], max_tokens: 160, temperature: 0})
  const m = r.choices[0].message as OpenAI.ChatCompletionMessage & {reasoning_content?: string}
  t.ok((m.reasoning_content ?? '').length > 0, 'reasoning_content')
  t.ok((m.content ?? '').length > 0, 'content')
  t.notMatch(m.content ?? '', /<think>|<\/think>|<\|im_end\|>/, 'no markup in the answer')
})

t.test('a tool-use prompt gives a parseable tool call, and the tool result gets an answer', async t => {
  const messages: OpenAI.ChatCompletionMessageParam[] = [{role: 'user', content: 'What is the weather in Paris?'}]
  const r = await client.chat.completions.create({model: 'splash/default', messages, tools: [weatherTool], max_tokens: 200, temperature: 0})
  const choice = r.choices[0]
  t.equal(choice.finish_reason, 'tool_calls')
  const call = choice.message.tool_calls?.[0]
  t.ok(call && call.type === 'function')
  if (!call || call.type !== 'function') return
  t.equal(call.function.name, 'get_weather')
  t.match(call.id, /^call_/)
  const args = JSON.parse(call.function.arguments)
  t.type(args.city, 'string')
  messages.push(choice.message, {role: 'tool', tool_call_id: call.id, content: JSON.stringify({city: args.city, temperature_c: 18, sky: 'cloudy'})})
  const after = await client.chat.completions.create({model: 'splash/default', messages, tools: [weatherTool], max_tokens: 200, temperature: 0})
  t.equal(after.choices[0].finish_reason, 'stop')
  t.ok((after.choices[0].message.content ?? '').length > 0, 'an answer after the tool result')
})

t.test('streamed tool-call deltas pass the Vercel AI SDK (what opencode runs)', async t => {
  const provider = createOpenAICompatible({name: 'splash', baseURL: `${server.url}/v1`})
  const result = streamText({
    model: provider.chatModel('splash/default'),
    prompt: 'What is the weather in Paris?',
    tools: {get_weather: tool({description: 'Get the current weather for a city', inputSchema: jsonSchema<{city: string}>({type: 'object', properties: {city: {type: 'string'}}, required: ['city']})})},
    temperature: 0,
    maxOutputTokens: 200,
  })
  const calls = await result.toolCalls
  t.equal(calls.length, 1)
  t.equal(calls[0].toolName, 'get_weather')
  t.type((calls[0].input as {city: string}).city, 'string')
  t.equal(await result.finishReason, 'tool-calls')
})

t.test("a request that leaves sampling unset gets the package's default (greedy, from its generation_config.json)", async t => {
  const messages = [{role: 'user' as const, content: 'Write a short poem about the sea.'}]
  // reasoning and answer together: 48 tokens may all be reasoning
  const text = async (extra: {temperature?: number; seed?: number}) => {
    const m = (await client.chat.completions.create({model: 'splash/default', messages, max_tokens: 48, ...extra})).choices[0].message
    return `${(m as {reasoning_content?: string}).reasoning_content ?? ''}|${m.content ?? ''}`
  }
  const greedy = await text({temperature: 0})
  t.equal(await text({}), greedy, 'no temperature: the greedy answer')
  t.equal(await text({seed: 7}), greedy, 'no temperature, a seed: still greedy')
  t.not(await text({temperature: 1.5, seed: 1}), greedy, 'a temperature the request sets is used')
  const anthropic = await fetch(`${server.url}/v1/messages`, {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify({model: 'splash/default', max_tokens: 48, messages}),
  })
  const body = (await anthropic.json()) as {content: {type: string; text?: string}[]}
  const again = await fetch(`${server.url}/v1/messages`, {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify({model: 'splash/default', max_tokens: 48, messages}),
  })
  t.same(((await again.json()) as typeof body).content, body.content, 'Messages with no temperature: the same answer twice')
})
