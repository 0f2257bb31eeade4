// Structured output over HTTP against a running `splash serve` (a report, not a test; plain JavaScript so that it
// runs where only the built server and its production dependencies are, such as the GPU machine's bundle).
// Sends chat completions one at a time, constrained either by a JSON Schema response_format (`schema`) or by
// tool_choice required over the tools the default package was trained on (`tool`: the call form that model writes
// by itself, so its draft predicts it); checks that every finished answer parses and validates (ajv), and prints
// the server's own timings: decode tok/s after the first token and the draft's acceptance length, as medians.
//   node bench/structured-output.mjs [base-url] [requests] [temperature] [max-tokens] [schema|tool]
import Ajv from 'ajv'

const base = process.argv[2] ?? 'http://127.0.0.1:8000'
const requests = Number(process.argv[3] ?? 8)
const temperature = Number(process.argv[4] ?? 0.7)
const maxTokens = Number(process.argv[5] ?? 128)
const mode = process.argv[6] ?? 'schema'
if (mode !== 'schema' && mode !== 'tool') throw new Error(`mode: schema or tool, not ${mode}`)

const schema = {
  type: 'object',
  properties: {
    name: {type: 'string', maxLength: 40},
    age: {type: 'integer', minimum: 0, maximum: 150},
    tags: {type: 'array', items: {type: 'string', maxLength: 16}, maxItems: 4},
    status: {enum: ['new', 'paid', 'sent']},
  },
  required: ['name', 'age', 'tags', 'status'],
  additionalProperties: false,
}
const ajv = new Ajv()
const validate = ajv.compile(schema)
const str = {type: 'string'}
const TOOLS = {
  send_email: {type: 'object', properties: {to: str, subject: str, body: str}, required: ['to', 'subject', 'body']},
  translate: {type: 'object', properties: {text: str, target_language: str}, required: ['text', 'target_language']},
  search_web: {type: 'object', properties: {query: str, max_results: {type: 'integer'}}, required: ['query']},
}
const tools = Object.entries(TOOLS).map(([name, parameters]) => ({type: 'function', function: {name, description: name.replace('_', ' '), parameters}}))
const toolValidators = Object.fromEntries(Object.entries(TOOLS).map(([name, p]) => [name, ajv.compile(p)]))
const ASKS = ['Email dave@example.com that the nightly build failed.', 'Translate "cat" into Spanish.', 'Search the web for the Splash inference engine.', 'Email heidi@example.com to say the meeting moved to 10.']
const median = xs => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0

const rates = []
const acceptance = []
let finished = 0
let cut = 0
for (let i = 0; i < requests; i++) {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify({
      max_tokens: maxTokens,
      temperature,
      seed: i,
      reasoning_effort: 'none',
      ...(mode === 'schema'
        ? {
            messages: [{role: 'user', content: `Describe customer number ${i} as a JSON record.`}],
            response_format: {type: 'json_schema', json_schema: {name: 'customer', schema, strict: true}},
          }
        : {messages: [{role: 'user', content: ASKS[i % ASKS.length]}], tools, tool_choice: 'required'}),
    }),
  })
  const body = await res.json()
  if (!res.ok) throw new Error(`request ${i}: ${res.status} ${JSON.stringify(body)}`)
  const choice = body.choices[0]
  if (choice.finish_reason === 'length') {
    cut++ // a prefix of a valid answer: the grammar guarantees only outputs that end
  } else if (mode === 'schema') {
    const value = JSON.parse(choice.message.content)
    if (!validate(value)) throw new Error(`request ${i}: the answer does not match the schema: ${choice.message.content}`)
    finished++
  } else {
    const calls = choice.message.tool_calls ?? []
    if (calls.length === 0) throw new Error(`request ${i}: no tool call under tool_choice required`)
    for (const call of calls) {
      const check = toolValidators[call.function.name]
      if (!check || !check(JSON.parse(call.function.arguments))) throw new Error(`request ${i}: invalid call ${JSON.stringify(call.function)}`)
    }
    finished++
  }
  rates.push(body.timings.predicted_per_second)
  if (body.timings.draft_acceptance_length !== undefined) acceptance.push(body.timings.draft_acceptance_length)
}
console.log(
  `structured output (${mode}), T=${temperature}, ${requests} requests of at most ${maxTokens} tokens: ${finished} valid, ${cut} cut by max_tokens, ` +
    `decode ${median(rates).toFixed(1)} tok/s (median; ${Math.min(...rates).toFixed(1)}–${Math.max(...rates).toFixed(1)})` +
    (acceptance.length ? `, acceptance length ${median(acceptance).toFixed(2)} tokens per pass` : ''),
)
