// PDFs are read on worker threads: pdfjs never loads on the calling thread (the check that tells a worker from the
// main thread: pdfjs itself yields to the event loop every few tens of milliseconds, so the HTTP check below would
// also pass, more slowly, with the old main-thread reader), refusals keep their message and part, and over HTTP a
// large PDF request leaves another client's stream running: the stream finishes while the PDF is still being read,
// its tokens arriving in the meantime.
import t from 'tap'
import OpenAI from 'openai'
import {readPdfOffThread} from '../../../src/chat/media/pdf-pool.js'
import {PDF_DEFAULTS} from '../../../src/chat/media/pdf.js'
import {startServe} from '../../helpers/cli.js'
import {synthFixture} from '../../helpers/packages.js'
import {heavyPdf} from '../../helpers/pdf.js'

t.test('readPdfOffThread: pages from a worker, refusals as 400s naming the part', async t => {
  const pages = await readPdfOffThread(new Uint8Array(heavyPdf(3, 20)), 'messages[0].content[0]', PDF_DEFAULTS)
  t.same(pages.map(p => [p.page, p.text]), [[1, 'Page 1'], [2, 'Page 2'], [3, 'Page 3']])
  // pdf.mjs sets globalThis.pdfjsLib when it loads: it never did on this thread
  t.equal((globalThis as {pdfjsLib?: unknown}).pdfjsLib, undefined, 'pdfjs was not loaded on the calling thread')
  await t.rejects(readPdfOffThread(new Uint8Array(Buffer.from('%PDF-1.4\nnonsense')), 'messages[0].content[1]', PDF_DEFAULTS), {
    status: 400,
    param: 'messages[0].content[1]',
    message: /^messages\[0\]\.content\[1\]: the PDF (is malformed|could not be read)/,
  })
  await t.rejects(readPdfOffThread(new Uint8Array(Buffer.from('plain text')), 'input[0]', PDF_DEFAULTS), {status: 400, param: 'input[0]', message: /not a PDF/})
  await t.rejects(readPdfOffThread(new Uint8Array(heavyPdf(4, 1)), 'x', {...PDF_DEFAULTS, pageLimit: 3}), {status: 400, message: /has 4 pages; at most 3/})
})

t.test('a large PDF request does not hold up another client\'s stream', async t => {
  const server = await startServe(['--model', await synthFixture('tiny-hybrid', 'q4'), '--no-webui'])
  t.teardown(async () => {
    server.child.kill('SIGTERM')
    await server.exited
  })
  const openai = new OpenAI({baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0})
  const model = (await openai.models.list()).data[0].id
  const pages = 60 // ~45 prompt tokens a page: well inside the tiny package's 4K context
  const pdf = heavyPdf(pages, 6000)
  const stream = await openai.chat.completions.create({
    model, messages: [{role: 'user', content: 'Count to forty.'}], max_tokens: 40, stream: true, temperature: 0,
    reasoning_effort: 'none' as 'low', ignore_eos: true,
  } as OpenAI.ChatCompletionCreateParamsStreaming)
  const order: string[] = []
  let big: Promise<OpenAI.ChatCompletion> | undefined
  let whileReading = 0
  let tokens = 0
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta.content !== undefined) tokens++
    if (!big) {
      // the stream is running: now a second client sends a large PDF
      big = openai.chat.completions.create({
        model, max_tokens: 1, temperature: 0, reasoning_effort: 'none' as 'low',
        messages: [{role: 'user', content: [{type: 'text', text: 'Summarise'}, {type: 'file', file: {filename: 'big.pdf', file_data: `data:application/pdf;base64,${pdf.toString('base64')}`}}]}],
      })
      big.then(() => order.push('pdf answered'), () => order.push('pdf failed'))
    } else if (order.length === 0) {
      whileReading++
    }
  }
  order.push('stream finished')
  const answer = await big!
  t.same(order, ['stream finished', 'pdf answered'], 'the stream finished while the PDF was being read')
  t.ok(tokens >= 30, `the stream produced its tokens (${tokens})`)
  t.ok(whileReading >= 20, `${whileReading} of the stream's chunks arrived after the PDF was sent and before it was answered`)
  t.ok(answer.usage!.prompt_tokens > pages * 3, `the ${pages} pages reached the prompt (${answer.usage!.prompt_tokens} tokens)`)
})
