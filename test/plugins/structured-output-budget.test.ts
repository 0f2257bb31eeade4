// Budget-aware structured output end to end on the default package: under a JSON Schema (or json_object) the answer
// parses and validates whatever max_tokens cuts it to, in every API, streaming and not, greedy and sampled; where
// the budget decided the end the API says so (length / incomplete: max_output_tokens / max_tokens); a max_tokens
// below the schema's shortest instance is a 400 before any work.
import t from 'tap'
import OpenAI from 'openai'
import {startServe, type ServerProcess} from '../helpers/cli.js'
import {invalidity} from '../helpers/ajv.js'
import {SCHEMAS} from '../helpers/schemas.js'
import {ask, clientsFor, type Api, type Clients} from '../helpers/structured-clients.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname
let server: ServerProcess
let c: Clients

t.before(async () => {
  server = await startServe(['--model', DEFAULT])
  c = clientsFor(server.url, 'splash/default')
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

const NAMES = ['flat object', 'nested objects', 'array of objects', 'free string', 'recursive tree', 'long bounded string']
const CUT: Record<Api, string> = {chat: 'length', responses: 'incomplete: max_output_tokens', messages: 'max_tokens'}

t.test('every answer parses and validates within max_tokens; the budget says length', async t => {
  const cases = SCHEMAS.filter(s => NAMES.includes(s.name))
  t.equal(cases.length, NAMES.length)
  let cut = 0
  let answered = 0
  for (const s of [...cases, {name: 'json_object', schema: undefined}]) {
    for (const api of ['chat', 'responses', 'messages'] as Api[]) {
      if (api === 'messages' && !s.schema) continue
      for (const [i, maxTokens] of [12, 17, 23, 31, 48].entries()) {
        const stream = i % 2 === 1
        const temperature = i % 3 === 0 ? 0 : 1
        const where = `${api} ${stream ? 'stream' : 'plain'} T=${temperature} ${s.name} max ${maxTokens}`
        let a
        try {
          a = await ask(c, api, {prompt: `Describe a ${s.name} as JSON, in detail.`, schema: s.schema, stream, maxTokens, temperature, seed: i})
        } catch (err) {
          // only a budget below the shortest instance may be refused
          const e = err as {status?: number; message?: string}
          t.equal(e.status, 400, `${where}: refused with 400`)
          // in the API's own field: Responses calls it max_output_tokens
          const field = api === 'responses' ? 'max_output_tokens' : 'max_tokens'
          t.match(e.message, new RegExp(`takes \\d+ tokens; raise ${field}`), `${where}: says why`)
          continue
        }
        answered++
        const bad = s.schema ? invalidity(s.schema, a.text) : invalidity({type: 'object'}, a.text)
        if (bad) t.fail(`${where}: ${bad}`)
        if (!a.ended) {
          cut++
          t.equal(a.finish, CUT[api], `${where}: the budget decided`)
        }
      }
    }
  }
  t.ok(answered > 60, `${answered} answered`)
  t.ok(cut > 20, `${cut} of them cut by the budget, all parse`)
})

t.test('a max_tokens below the shortest instance is a 400 before any work', async t => {
  const openai = new OpenAI({baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0})
  const schema = {type: 'object', properties: {name: {type: 'string', minLength: 20}, tags: {type: 'array', items: {type: 'string'}, minItems: 3}}, required: ['name', 'tags']}
  const err = await openai.chat.completions
    .create({model: c.model, messages: [{role: 'user', content: 'x'}], max_tokens: 5, response_format: {type: 'json_schema', json_schema: {name: 'p', schema}}})
    .then(() => undefined, (e: {status: number; error: {code: string; param: string; message: string}}) => e)
  t.equal(err?.status, 400)
  t.equal(err?.error.code, 'max_tokens_too_small')
  t.equal(err?.error.param, 'max_tokens')
  t.match(err?.error.message, /max_tokens is 5, but the JSON Schema's shortest instance takes \d+ tokens/)
  // a schema with no finite instance at all
  const cyclic = await openai.chat.completions
    .create({model: c.model, messages: [{role: 'user', content: 'x'}], max_tokens: 50, response_format: {type: 'json_schema', json_schema: {name: 'r', schema: {$ref: '#'}}}})
    .then(() => undefined, (e: {status: number; error: {message: string}}) => e)
  t.equal(cyclic?.status, 400)
  t.match(cyclic?.error.message, /admits no finite value/)
  t.notMatch(cyclic?.error.message, /sample\.rows|allows no token/)
})
