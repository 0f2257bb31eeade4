// The agent SDKs against the real server on the default (trained) package: @openai/agents runs a two-turn
// tool loop over /v1/responses, and @ai-sdk/anthropic talks to /v1/messages.
import t from 'tap'
import OpenAI from 'openai'
import {Agent, OpenAIResponsesModel, run, tool} from '@openai/agents'
import {createAnthropic} from '@ai-sdk/anthropic'
import {generateText, streamText, jsonSchema, tool as aiTool} from 'ai'
import {startServe, type ServerProcess} from '../helpers/cli.js'

let server: ServerProcess
t.before(async () => {
  server = await startServe([])
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

t.test('@openai/agents: a two-turn tool loop over the Responses API', async t => {
  const client = new OpenAI({baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0})
  const calls: string[] = []
  const getWeather = tool({
    name: 'get_weather',
    description: 'Get the current weather for a city',
    parameters: {type: 'object' as const, properties: {city: {type: 'string'}}, required: ['city'], additionalProperties: true as const}, // non-strict: the SDK's type for it
    strict: false,
    execute: async (input: unknown) => {
      calls.push((input as {city: string}).city)
      return JSON.stringify({temperature_c: 18, sky: 'cloudy'})
    },
  })
  const agent = new Agent({
    name: 'weather',
    instructions: 'Answer questions about the weather.',
    model: new OpenAIResponsesModel(client, 'splash/default'),
    modelSettings: {temperature: 0, maxTokens: 200},
    tools: [getWeather],
  })
  const result = await run(agent, 'What is the weather in Paris?', {maxTurns: 4})
  t.equal(calls.length, 1, 'the tool ran once')
  t.type(calls[0], 'string')
  t.type(result.finalOutput, 'string')
  t.ok(String(result.finalOutput).length > 0, 'a final answer after the tool result')
})

t.test('@ai-sdk/anthropic: text and a tool call over Messages', async t => {
  const anthropic = createAnthropic({baseURL: `${server.url}/v1`, apiKey: 'unused'})
  const model = anthropic('splash/default')
  const g = await generateText({model, prompt: 'What is 2+2?', maxOutputTokens: 120, temperature: 0})
  t.ok(g.text.length > 0)
  t.ok(['stop', 'length'].includes(g.finishReason))
  const s = streamText({
    model,
    prompt: 'What is the weather in Paris?',
    tools: {get_weather: aiTool({description: 'Get the current weather for a city', inputSchema: jsonSchema<{city: string}>({type: 'object', properties: {city: {type: 'string'}}, required: ['city']})})},
    maxOutputTokens: 200,
    temperature: 0,
  })
  const calls = await s.toolCalls
  t.equal(calls.length, 1)
  t.equal(calls[0].toolName, 'get_weather')
  t.equal(await s.finishReason, 'tool-calls')
})
