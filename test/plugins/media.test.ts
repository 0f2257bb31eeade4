// Images and PDFs through every API, end to end: the real server on a synthetic package with a vision tower
// (preset tiny-vl), talked to with the official openai and @anthropic-ai/sdk clients. Checks that the image reaches
// the model (its pad span is counted and changes the answer's logprobs), that PDF text reaches the prompt with page
// markers, and that bad input gets a 400 in each API's shape naming the part.
import t from 'tap'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import {readFileSync} from 'node:fs'
import sharp from 'sharp'
import {startServe, type ServerProcess} from '../helpers/cli.js'
import {synthFixture} from '../helpers/packages.js'
import {makePdf} from '../helpers/pdf.js'

const FIXTURE = new URL('../fixtures/reference/qwen3_5-vl-image/', import.meta.url).pathname
const pngA = readFileSync(`${FIXTURE}image-a.png`) // 96×64 → 3×2 merged tokens
const pngB = readFileSync(`${FIXTURE}image-b.png`) // 75×50 → 64×64 → 2×2 merged tokens
const dataUrl = (b: Buffer, type = 'image/png') => `data:${type};base64,${b.toString('base64')}`
const pdf = makePdf('Hello from page one')

/** A PDF whose trailer names a standard-security /Encrypt dictionary the empty password does not open. */
function encryptedPdf(): Buffer {
  const hex = (n: number, seed: number) => Array.from({length: n}, (_, i) => ((i * 37 + seed) % 256).toString(16).padStart(2, '0')).join('')
  const body = makePdf('secret').toString('latin1')
  const enc = `6 0 obj\n<< /Filter /Standard /V 1 /R 2 /O <${hex(32, 1)}> /U <${hex(32, 2)}> /P -4 >>\nendobj\n`
  const at = body.indexOf('xref')
  return Buffer.from(
    body.slice(0, at) + enc + body.slice(at).replace('/Root 1 0 R >>', `/Root 1 0 R /Encrypt 6 0 R /ID [<${hex(16, 3)}> <${hex(16, 3)}>] >>`).replace('/Size 6', '/Size 7'),
    'latin1',
  )
}

let server: ServerProcess
let openai: OpenAI
let anthropic: Anthropic
let modelId: string

t.before(async () => {
  const dir = await synthFixture('tiny-vl', 'q4')
  // 4096: image A (6,144 pixels) is over the cap, image B (3,750) is under it
  server = await startServe(['--model', dir, '--max-image-pixels', '4096'])
  openai = new OpenAI({baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0})
  anthropic = new Anthropic({baseURL: server.url, apiKey: 'unused', maxRetries: 0})
  modelId = (await openai.models.list()).data[0].id
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

const chat = (content: OpenAI.ChatCompletionContentPart[] | string, extra: Partial<OpenAI.ChatCompletionCreateParamsNonStreaming> = {}) =>
  openai.chat.completions.create({model: modelId, messages: [{role: 'user', content}], max_tokens: 3, temperature: 0, reasoning_effort: 'none' as 'low', ...extra})

t.test('chat completions: an image_url data URL reaches the model', async t => {
  const text = await chat('What is this?')
  const withImage = await chat([{type: 'text', text: 'What is this?'}, {type: 'image_url', image_url: {url: dataUrl(pngB)}}], {logprobs: true, top_logprobs: 2})
  // <|vision_start|>, 2×2 merged patches, <|vision_end|>
  t.equal(withImage.usage!.prompt_tokens - text.usage!.prompt_tokens, 6, 'the image takes its start, 4 pads and its end')
  const tok = await fetch(`${server.url}/tokenize`, {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify({messages: [{role: 'user', content: [{type: 'text', text: 'What is this?'}, {type: 'image_url', image_url: {url: dataUrl(pngB)}}]}], reasoning_effort: 'none'}),
  })
  t.equal(((await tok.json()) as {count: number}).count, withImage.usage!.prompt_tokens, '/tokenize counts the image as generation does')
  const again = await chat([{type: 'text', text: 'What is this?'}, {type: 'image_url', image_url: {url: dataUrl(pngB)}}], {logprobs: true, top_logprobs: 2})
  t.same(again.choices[0].logprobs, withImage.choices[0].logprobs, 'the same image gives the same answer')
  const flipped = await sharp(pngB).flop().png().toBuffer()
  const other = await chat([{type: 'text', text: 'What is this?'}, {type: 'image_url', image_url: {url: dataUrl(flipped)}}], {logprobs: true, top_logprobs: 2})
  t.not(other.choices[0].logprobs!.content![0].logprob, withImage.choices[0].logprobs!.content![0].logprob, 'another image changes the logits')
  const stream = await openai.chat.completions.create({
    model: modelId, messages: [{role: 'user', content: [{type: 'image_url', image_url: {url: dataUrl(pngB)}}]}], max_tokens: 3, stream: true,
  })
  let chunks = 0
  for await (const c of stream) chunks += c.choices.length
  t.ok(chunks > 0, 'streaming works with an image')
})

t.test('the prefix cache reuses an image only for the same image', async t => {
  const ask = (png: Buffer) => chat([{type: 'text', text: 'Cache me: what is in this picture?'}, {type: 'image_url', image_url: {url: dataUrl(png)}}, {type: 'text', text: ' Answer briefly.'}])
  const first = await ask(pngB)
  const again = await ask(pngB)
  const n = first.usage!.prompt_tokens
  t.equal(again.usage!.prompt_tokens, n)
  t.equal(again.usage!.prompt_tokens_details?.cached_tokens, n - 1, 'the same image: all but the last prompt token restored')
  t.same(again.choices[0].message, first.choices[0].message, 'and the same answer')
  const other = await ask(await sharp(pngB).flip().png().toBuffer())
  const cached = other.usage!.prompt_tokens_details?.cached_tokens ?? 0
  t.ok(cached < n - 6 - 5, `another image with the same text: only the text before the image can be reused (${cached} of ${n})`)
})

t.test('chat completions: a PDF file part becomes page-marked text', async t => {
  const r = await chat([{type: 'text', text: 'Summarise'}, {type: 'file', file: {filename: 'note.pdf', file_data: `data:application/pdf;base64,${pdf.toString('base64')}`}}], {
    return_token_ids: true,
  } as object)
  const ids = (r as unknown as {prompt_token_ids: number[]}).prompt_token_ids
  const res = await fetch(`${server.url}/detokenize`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify({tokens: ids})})
  const prompt = ((await res.json()) as {prompt: string}).prompt
  t.match(prompt, /Summarise\[PDF "note\.pdf", 1 page\]\n\[Page 1\]\nHello from page one\n\[End of PDF "note\.pdf"\]/)
})

t.test('a PDF page without text is rendered and goes to the vision encoder', async t => {
  const blank = makePdf('') // one page, no text layer
  const r = await chat([{type: 'file', file: {filename: 'scan.pdf', file_data: `data:application/pdf;base64,${blank.toString('base64')}`}}], {return_token_ids: true} as object)
  const ids = (r as unknown as {prompt_token_ids: number[]}).prompt_token_ids
  const res = await fetch(`${server.url}/detokenize`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify({tokens: ids})})
  const prompt = ((await res.json()) as {prompt: string}).prompt
  // rendered under the 4,096-pixel cap, then resized to 64×64: 2×2 merged patches
  t.match(prompt, /\[Page 1\]\n<\|vision_start\|>(<\|image_pad\|>){4}<\|vision_end\|>\n\[End of PDF "scan\.pdf"\]/)
})

t.test('responses: input_image and input_file', async t => {
  const r = await openai.responses.create({
    model: modelId,
    max_output_tokens: 3,
    reasoning: {effort: 'none' as 'low'},
    input: [{role: 'user', content: [
      {type: 'input_text', text: 'Look:'},
      {type: 'input_image', image_url: dataUrl(pngB), detail: 'auto'},
      {type: 'input_file', filename: 'note.pdf', file_data: `data:application/pdf;base64,${pdf.toString('base64')}`},
    ]}],
  })
  t.equal(r.status, 'incomplete')
  const text = await openai.responses.create({model: modelId, max_output_tokens: 3, reasoning: {effort: 'none' as 'low'}, input: 'Look:'})
  t.ok(r.usage!.input_tokens - text.usage!.input_tokens > 6 + 10, 'the image span and the PDF text are in the prompt')
})

t.test('anthropic: image (base64) and document (PDF) blocks; count_tokens agrees with usage', async t => {
  const messages: Anthropic.MessageParam[] = [{role: 'user', content: [
    {type: 'text', text: 'Describe'},
    {type: 'image', source: {type: 'base64', media_type: 'image/png', data: pngB.toString('base64')}},
    {type: 'document', source: {type: 'base64', media_type: 'application/pdf', data: pdf.toString('base64')}},
  ]}]
  // greedy: at the default temperature the random draw can end the turn inside 3 tokens
  // (the SDK's types leave `temperature` out; the Messages API takes it)
  const m = await anthropic.messages.create({model: modelId, max_tokens: 3, temperature: 0, messages} as Anthropic.MessageCreateParamsNonStreaming)
  t.equal(m.stop_reason, 'max_tokens')
  const count = await anthropic.messages.countTokens({model: modelId, messages})
  // input_tokens leaves out what the prefix cache restored
  t.equal(count.input_tokens, m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0), 'count_tokens counts the image span and the PDF text')
  const plain = await anthropic.messages.countTokens({model: modelId, messages: [{role: 'user', content: 'Describe'}]})
  t.ok(count.input_tokens - plain.input_tokens > 6 + 10)
  // a tool that returns a screenshot: the image goes to the model inside the tool result
  const turn = (result: Anthropic.ToolResultBlockParam['content']): Anthropic.MessageParam[] => [
    {role: 'user', content: 'Take a screenshot'},
    {role: 'assistant', content: [{type: 'tool_use', id: 'toolu_1', name: 'screenshot', input: {}}]},
    {role: 'user', content: [{type: 'tool_result', tool_use_id: 'toolu_1', content: result}]},
  ]
  const tools: Anthropic.Tool[] = [{name: 'screenshot', description: 'Screenshot', input_schema: {type: 'object', properties: {}}}]
  const withShot = await anthropic.messages.countTokens({model: modelId, tools, messages: turn([{type: 'text', text: 'done'}, {type: 'image', source: {type: 'base64', media_type: 'image/png', data: pngB.toString('base64')}}])})
  const textOnly = await anthropic.messages.countTokens({model: modelId, tools, messages: turn([{type: 'text', text: 'done'}])})
  t.equal(withShot.input_tokens - textOnly.input_tokens, 6, 'the screenshot in the tool result: start, 4 pads, end')
  const answered = await anthropic.messages.create({model: modelId, max_tokens: 3, tools, messages: turn([{type: 'image', source: {type: 'base64', media_type: 'image/png', data: pngB.toString('base64')}}])})
  t.equal(answered.type, 'message')
})

t.test('bad input: a 400 in each API\'s shape naming the part', async t => {
  const corrupt = pngB.subarray(0, 120)
  await t.rejects(chat([{type: 'image_url', image_url: {url: dataUrl(corrupt)}}]), {status: 400, param: 'messages[0].content[0]', message: /messages\[0\]\.content\[0\]: the image could not be decoded/})
  const tiff = await sharp(pngB).tiff().toBuffer()
  await t.rejects(chat([{type: 'image_url', image_url: {url: dataUrl(tiff, 'image/tiff')}}]), {status: 400, message: /content\[0\]: the image is a tiff image; supported formats are JPEG, PNG, WebP and GIF/})
  await t.rejects(chat([{type: 'text', text: 'x'}, {type: 'image_url', image_url: {url: dataUrl(pngA)}}]), {status: 400, code: 'image_too_large', message: /content\[1\]: the image is 96×64 = 6144 pixels, over this server's limit of 4096/})
  await t.rejects(chat([{type: 'image_url', image_url: {url: 'https://example.com/cat.png'}}]), {status: 400, message: /does not fetch image URLs \(start it with --allow-image-urls\)/})
  await t.rejects(chat([{type: 'image_url', image_url: {url: 'data:image/png;base64,***'}}]), {status: 400, message: /not valid base64/})
  await t.rejects(
    chat([{type: 'file', file: {filename: 'x.pdf', file_data: `data:application/pdf;base64,${encryptedPdf().toString('base64')}`}}]),
    {status: 400, param: 'messages[0].content[0]', message: /the PDF is encrypted/},
  )
  await t.rejects(
    chat([{type: 'file', file: {filename: 'x.pdf', file_data: `data:application/pdf;base64,${Buffer.from('%PDF-1.4\nnonsense').toString('base64')}`}}]),
    {status: 400, message: /content\[0\]: the PDF (is malformed|could not be read)/},
  )
  await t.rejects(chat([{type: 'file', file: {filename: 'x.txt', file_data: `data:text/plain;base64,${Buffer.from('hi').toString('base64')}`}}]), {status: 400, message: /files of type text\/plain are not supported/})

  await t.rejects(
    openai.responses.create({model: modelId, input: [{role: 'user', content: [{type: 'input_image', image_url: dataUrl(corrupt), detail: 'auto'}]}]}),
    {status: 400, message: /input\[0\]\.content\[0\]: the image could not be decoded/},
  )
  const bad = await anthropic.messages
    .create({model: modelId, max_tokens: 3, messages: [{role: 'user', content: [{type: 'image', source: {type: 'base64', media_type: 'image/png', data: corrupt.toString('base64')}}]}]})
    .catch((e: unknown) => e)
  t.ok(bad instanceof Anthropic.BadRequestError)
  t.match((bad as InstanceType<typeof Anthropic.BadRequestError>).error, {type: 'error', error: {type: 'invalid_request_error', message: /messages\[0\]\.content\[0\]: the image could not be decoded/}})
  const doc = await anthropic.messages
    .create({model: modelId, max_tokens: 3, messages: [{role: 'user', content: [{type: 'document', source: {type: 'base64', media_type: 'application/pdf', data: encryptedPdf().toString('base64')}}]}]})
    .catch((e: unknown) => e)
  t.match((doc as InstanceType<typeof Anthropic.BadRequestError>).error, {error: {message: /messages\[0\]\.content\[0\]: the PDF is encrypted/}})
  // the server is still there and well
  t.equal((await chat('still there?')).choices.length, 1)
})
