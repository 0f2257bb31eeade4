// Structured output over HTTP against a running `splash serve` (a report, not a test; plain JavaScript so that it
// runs where only the built server and its production dependencies are, such as the GPU machine's bundle).
// Sends chat completions one at a time with a JSON Schema response_format, checks that every finished answer parses
// and validates (ajv), and prints the server's own timings: decode tok/s after the first token and the draft's
// acceptance length, as medians over the requests.
//   node bench/structured-output.mjs [base-url] [requests] [temperature] [max-tokens]
import Ajv from 'ajv'

const base = process.argv[2] ?? 'http://127.0.0.1:8000'
const requests = Number(process.argv[3] ?? 8)
const temperature = Number(process.argv[4] ?? 0.7)
const maxTokens = Number(process.argv[5] ?? 128)

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
const validate = new Ajv().compile(schema)
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
      messages: [{role: 'user', content: `Describe customer number ${i} as a JSON record.`}],
      max_tokens: maxTokens,
      temperature,
      seed: i,
      reasoning_effort: 'none',
      response_format: {type: 'json_schema', json_schema: {name: 'customer', schema, strict: true}},
    }),
  })
  const body = await res.json()
  if (!res.ok) throw new Error(`request ${i}: ${res.status} ${JSON.stringify(body)}`)
  const choice = body.choices[0]
  if (choice.finish_reason === 'length') {
    cut++ // a prefix of a valid answer: the grammar guarantees only outputs that end
  } else {
    const value = JSON.parse(choice.message.content)
    if (!validate(value)) throw new Error(`request ${i}: the answer does not match the schema: ${choice.message.content}`)
    finished++
  }
  rates.push(body.timings.predicted_per_second)
  if (body.timings.draft_acceptance_length !== undefined) acceptance.push(body.timings.draft_acceptance_length)
}
console.log(
  `structured output, T=${temperature}, ${requests} requests of at most ${maxTokens} tokens: ${finished} valid, ${cut} cut by max_tokens, ` +
    `decode ${median(rates).toFixed(1)} tok/s (median; ${Math.min(...rates).toFixed(1)}–${Math.max(...rates).toFixed(1)})` +
    (acceptance.length ? `, acceptance length ${median(acceptance).toFixed(2)} tokens per pass` : ''),
)
