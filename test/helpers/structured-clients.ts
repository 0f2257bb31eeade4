// The three APIs asked for structured output through their official SDKs, streaming or not; each answer
// comes back as its JSON text and whether the model ended it (rather than the token limit).
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import {startServe, type ServerProcess} from './cli.js'

export type Api = 'chat' | 'responses' | 'messages'

export interface Answer {
  text: string
  /** The output ended by itself (finish_reason stop / status completed / end_turn). */
  ended: boolean
  /** The API's own word for the end: finish_reason, status (and incomplete reason), stop_reason. */
  finish: string
}

export interface Clients {
  openai: OpenAI
  anthropic: Anthropic
  model: string
}

export function clientsFor(url: string, model: string): Clients {
  return {
    openai: new OpenAI({baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0}),
    anthropic: new Anthropic({baseURL: url, apiKey: 'unused', maxRetries: 0}),
    model,
  }
}

/** `splash serve` on a package, with clients for the model it serves (its id as /v1/models reports it). */
export async function serveWithClients(pkg: string): Promise<{server: ServerProcess; c: Clients; stop(): Promise<void>}> {
  const server = await startServe(['--model', pkg])
  const model = ((await (await fetch(`${server.url}/v1/models`)).json()) as {data: Array<{id: string}>}).data[0]!.id
  const stop = async () => {
    server.child.kill('SIGTERM')
    await server.exited
  }
  return {server, c: clientsFor(server.url, model), stop}
}

export interface Ask {
  prompt: string
  /** A JSON Schema, or undefined for "any JSON object" (not offered by Messages). */
  schema?: Record<string, unknown>
  stream: boolean
  maxTokens: number
  temperature: number
  seed?: number
}

export async function ask(c: Clients, api: Api, q: Ask): Promise<Answer> {
  if (api === 'chat') {
    const body = {
      model: c.model,
      messages: [{role: 'user' as const, content: q.prompt}],
      max_tokens: q.maxTokens,
      temperature: q.temperature,
      seed: q.seed,
      response_format: q.schema ? {type: 'json_schema' as const, json_schema: {name: 'answer', schema: q.schema, strict: true}} : {type: 'json_object' as const},
    }
    if (!q.stream) {
      const r = await c.openai.chat.completions.create(body)
      return {text: r.choices[0]!.message.content ?? '', ended: r.choices[0]!.finish_reason === 'stop', finish: r.choices[0]!.finish_reason}
    }
    let text = ''
    let finish: string | null = null
    for await (const chunk of await c.openai.chat.completions.create({...body, stream: true})) {
      text += chunk.choices[0]?.delta.content ?? ''
      finish = chunk.choices[0]?.finish_reason ?? finish
    }
    return {text, ended: finish === 'stop', finish: finish ?? ''}
  }
  if (api === 'responses') {
    const body = {
      model: c.model,
      input: q.prompt,
      max_output_tokens: q.maxTokens,
      temperature: q.temperature,
      text: {format: q.schema ? {type: 'json_schema' as const, name: 'answer', schema: q.schema, strict: true} : {type: 'json_object' as const}},
    }
    const r = q.stream ? await c.openai.responses.stream(body).finalResponse() : await c.openai.responses.create(body)
    return {text: r.output_text, ended: r.status === 'completed', finish: r.status === 'incomplete' ? `incomplete: ${r.incomplete_details?.reason}` : String(r.status)}
  }
  if (!q.schema) throw new Error('Messages has no "any JSON object" format')
  const body = {
    model: c.model,
    max_tokens: q.maxTokens,
    temperature: q.temperature,
    messages: [{role: 'user' as const, content: q.prompt}],
    output_config: {format: {type: 'json_schema' as const, schema: q.schema}},
  }
  const m = q.stream ? await c.anthropic.messages.stream(body).finalMessage() : await c.anthropic.messages.create(body)
  const text = m.content.map(b => (b.type === 'text' ? b.text : '')).join('')
  return {text, ended: m.stop_reason === 'end_turn', finish: String(m.stop_reason)}
}
