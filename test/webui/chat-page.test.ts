// The chat page in a real browser (Debian's Chromium through playwright-core) against the real server
// (`splash serve --model <synthetic package>`): a streamed answer, stop, an image attachment, reload, the
// conversation tools, Markdown safety, keyboard and contrast, a narrow window, the API-key dialog, and a package
// without a vision encoder, for which the page offers PDFs only.
// Screenshots go to .tap/webui-screenshots/ (their paths are printed as comments).
import t from 'tap'
import {mkdtemp, writeFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'
import type {Browser, BrowserContext, Page, Request} from 'playwright-core'
import {runCli, startServe, type ServerProcess} from '../helpers/cli.js'
import {makePdf} from '../helpers/pdf.js'
import {contrast, haveChromium, launchChromium, makePng, screenshot} from './browser.js'

// The package's own window (4096), stated so that every answer of the random-weight model is bounded.
const SERVE_ARGS = ['--max-context', '4096']
const STREAM_MS = 180_000

interface Seen {
  streaming: boolean
  len: number
}

declare global {
  interface Window {
    __seen: Seen[]
    __stopOnFirstToken: boolean
  }
}

async function stopServer(server: ServerProcess | undefined) {
  if (!server || server.child.exitCode !== null) return
  server.child.kill('SIGTERM')
  await server.exited
}

/** Records, on every change of the message list, whether the last answer streams and how long it is. */
async function watchAnswers(page: Page) {
  await page.evaluate(() => {
    window.__seen = []
    window.__stopOnFirstToken = false
    const box = document.getElementById('messages')!
    new MutationObserver(() => {
      const last = [...box.querySelectorAll('.msg-assistant')].at(-1)
      if (!last) return
      const streaming = last.querySelector('.msg-body')?.getAttribute('aria-busy') === 'true'
      const len = (last.querySelector('.answer .markdown')?.textContent ?? '').length + (last.querySelector('.reasoning-text')?.textContent ?? '').length
      window.__seen.push({streaming, len})
      if (streaming && len > 0 && window.__stopOnFirstToken) {
        window.__stopOnFirstToken = false
        document.getElementById('stop')!.click()
      }
    }).observe(box, {subtree: true, childList: true, characterData: true})
  })
}

const isChat = (r: Request) => r.url().endsWith('/v1/chat/completions') && r.method() === 'POST'

/**
 * Adds sampling fields to the page's chat requests on their way to the server. The synthetic model has random
 * weights: sampled at temperature 1 it may end an answer after 3 tokens, which leaves nothing to watch
 * stream or to stop. Greedy decoding (temperature 0) makes every answer the same and long: it runs to
 * max_tokens, or to the context window when none is given. Assertions read the page's own request body
 * (`request.postDataJSON()`), which is what the page sent before these fields were added.
 */
async function steer(page: Page, extra: Record<string, unknown>) {
  await page.unroute('**/v1/chat/completions')
  await page.route('**/v1/chat/completions', route =>
    route.continue({postData: JSON.stringify({...route.request().postDataJSON(), ...extra})}),
  )
}

/** Types `text` and presses Enter; resolves with the request the page sent. */
async function send(page: Page, text: string): Promise<Record<string, any>> {
  await page.locator('#prompt').fill(text)
  const request = page.waitForRequest(isChat)
  await page.locator('#prompt').press('Enter')
  return (await request).postDataJSON()
}

async function answerDone(page: Page) {
  await page.locator('#send').waitFor({state: 'visible', timeout: STREAM_MS})
  await page.locator('#stop').waitFor({state: 'hidden'})
}

async function lastAnswer(page: Page) {
  const last = page.locator('.msg-assistant').last()
  return {
    text: (await last.locator('.answer .markdown').textContent()) ?? '',
    reasoning: (await last.locator('.reasoning-text').count()) ? ((await last.locator('.reasoning-text').textContent()) ?? '') : '',
    error: (await last.locator('.error').count()) ? ((await last.locator('.error').textContent()) ?? '') : '',
    stopped: (await last.locator('.note').count()) > 0,
  }
}

async function serverMetrics(server: ServerProcess) {
  const text = await (await fetch(`${server.url}/metrics`)).text()
  const value = (name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? NaN)
  return {
    running: value('splash_running_requests'),
    generated: value('splash_generation_tokens_total'),
    endings: [...text.matchAll(/^splash_generations_total\{reason="(\w+)"\} (\d+)/gm)].map(m => `${m[1]}=${m[2]}`).join(' '),
  }
}

t.test('the chat page in Chromium against splash serve', async t => {
  if (!haveChromium()) {
    t.fail('Chromium is missing: run scripts/setup-system.sh (it installs the Debian chromium package)')
    return
  }
  const dir = await mkdtemp(path.join(tmpdir(), 'splash-webui-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  const pkg = path.join(dir, 'package')
  // a package with a vision tower, so the page offers images and sends them
  const synth = await runCli(['package', 'synth', '--preset', 'tiny-vl', '--out', pkg], {}, 300_000)
  t.equal(synth.code, 0, 'package synth --preset tiny-vl', {stderr: synth.stderr})
  if (synth.code !== 0) return

  let server: ServerProcess | undefined
  let browser: Browser | undefined
  t.teardown(async () => {
    await browser?.close()
    await stopServer(server)
  })
  server = await startServe(['--model', pkg, ...SERVE_ARGS])
  const models = (await (await fetch(`${server.url}/v1/models`)).json()) as {data: Array<{id: string; context_length: number}>}
  t.equal(models.data.length, 1, 'the package is served')
  const model = models.data[0]
  browser = await launchChromium()
  const context: BrowserContext = await browser.newContext({viewport: {width: 1280, height: 860}})
  // Generous waits: CI machines run other test files alongside this one.
  context.setDefaultTimeout(60_000)
  const page = await context.newPage()
  const pageErrors: string[] = []
  page.on('pageerror', e => pageErrors.push(e.message))
  page.on('console', m => {
    // The browser logs every 4xx response; those are answers the page shows, not errors of the page.
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) pageErrors.push(m.text())
  })
  const shot = async (name: string) => t.comment(`screenshot: ${await screenshot(page, name)}`)

  await steer(page, {temperature: 0, max_tokens: 1000})
  await page.goto(server.url)
  await page.locator('#st-model').filter({hasText: model.id}).waitFor()
  t.equal(await page.locator('#st-model').textContent(), `Model: ${model.id}`, 'a vision package: no "text only"')
  t.equal(await page.locator('#file-input').getAttribute('accept'), 'image/*,application/pdf,.pdf', 'the picker offers images and PDFs')
  await shot('01-empty')

  const first = {question: '', text: ''}
  t.test('send a message and see a streamed answer', async t => {
    // Effort "none" turns thinking off, so the random-weight model answers in content at once.
    await page.locator('#effort').selectOption('none')
    await watchAnswers(page)
    await page.locator('#prompt').fill('Tell me a story')
    await page.locator('#prompt').press('Shift+Enter')
    await page.locator('#prompt').pressSequentially('about the sea.')
    t.equal(await page.locator('#prompt').inputValue(), 'Tell me a story\nabout the sea.', 'Shift+Enter is a new line, not a send')
    const request = page.waitForRequest(isChat)
    await page.locator('#prompt').press('Enter')
    const body = (await request).postDataJSON()
    t.equal(body.stream, true)
    t.same(body.stream_options, {include_usage: true})
    t.equal(body.model, model.id)
    t.equal(body.reasoning_effort, 'none')
    t.same(body.messages, [{role: 'user', content: 'Tell me a story\nabout the sea.'}])
    t.equal(await page.locator('#prompt').inputValue(), '', 'the box is emptied on send')
    await answerDone(page)
    const seen = await page.evaluate(() => window.__seen)
    const growing = new Set(seen.filter(s => s.streaming && s.len > 0).map(s => s.len))
    t.ok(growing.size >= 2, `the answer grew in ${growing.size} steps while it streamed`, {seen})
    const answer = await lastAnswer(page)
    t.equal(answer.error, '', 'no error')
    t.ok(answer.text.length > 0, 'the answer has text')
    t.match(await page.locator('#st-context').textContent(), new RegExp(`^Context: [\\d,]+ / ${model.context_length.toLocaleString('en-US')} \\(`), 'context used vs the window')
    t.match(await page.locator('#st-speed').textContent(), /tok\/s$/, 'tokens per second')
    t.equal(await page.locator('.conv-item').count(), 1)
    t.match(await page.locator('.conv-item.current .conv-open').textContent(), /^Tell me a story about the sea\./)
    first.question = 'Tell me a story\nabout the sea.'
    first.text = answer.text
    await shot('02-answer')
  })

  t.test('reasoning streams in a collapsible block', async t => {
    // Sampled (seeded) rather than greedy: the random model then thinks before it answers.
    await steer(page, {seed: 4, max_tokens: 1200})
    await page.locator('#new-chat').click()
    await page.locator('#effort').selectOption('low')
    await page.evaluate(() => {
      const box = document.getElementById('messages')!
      const states: string[] = []
      ;(window as unknown as {__reasoning: string[]}).__reasoning = states
      new MutationObserver(() => {
        const d = [...box.querySelectorAll('.msg-assistant details.reasoning')].at(-1) as HTMLDetailsElement | undefined
        if (d) states.push(`${d.open ? 'open' : 'closed'}:${d.querySelector('summary')!.textContent}`)
      }).observe(box, {subtree: true, childList: true, characterData: true, attributes: true})
    })
    // The page draws once per animation frame, and this model's reasoning may be a few tokens that all arrive before
    // the first frame: the browser's own network throttling spreads the stream out so the thinking state is drawn.
    const cdp = await page.context().newCDPSession(page)
    await cdp.send('Network.enable')
    await cdp.send('Network.emulateNetworkConditions', {offline: false, latency: 0, downloadThroughput: 3000, uploadThroughput: -1})
    const body = await send(page, 'Why is the sky blue?')
    t.equal(body.reasoning_effort, 'low')
    await answerDone(page)
    await cdp.send('Network.emulateNetworkConditions', {offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1})
    await cdp.detach()
    const states = await page.evaluate(() => (window as unknown as {__reasoning: string[]}).__reasoning)
    const answer = await lastAnswer(page)
    t.ok(states.includes('open:Thinking…'), 'open, saying "Thinking…", while the model thinks', {states, reasoning: answer.reasoning})
    t.ok(answer.reasoning.length > 0, 'the reasoning is kept')
    const details = page.locator('.msg-assistant details.reasoning').last()
    t.equal(await details.locator('summary').textContent(), 'Reasoning')
    if (answer.text.length > 0) t.equal(await details.evaluate(d => (d as HTMLDetailsElement).open), false, 'folded once the answer came')
    await details.evaluate(d => ((d as HTMLDetailsElement).open = false))
    await details.locator('summary').press('Enter')
    t.equal(await details.evaluate(d => (d as HTMLDetailsElement).open), true, 'opens from the keyboard')
    await shot('03-reasoning')
    await page.locator('#effort').selectOption('none')
    await steer(page, {temperature: 0, max_tokens: 1000})
  })

  t.test('stop a generation', async t => {
    // Greedy, past end-of-turn tokens and without max_tokens, this answer would run to the end of the window.
    await steer(page, {temperature: 0, ignore_eos: true})
    await page.locator('#new-chat').click()
    await watchAnswers(page)
    const before = await serverMetrics(server!)
    await page.evaluate(() => (window.__stopOnFirstToken = true))
    await send(page, 'Tell me a very long story.')
    await answerDone(page)
    const answer = await lastAnswer(page)
    t.ok(answer.stopped, 'the answer is marked as stopped')
    t.equal(answer.error, '')
    t.ok(answer.text.length > 0, 'what came before the stop is kept')
    // The server notices the closed connection and cancels the generation.
    let after = await serverMetrics(server!)
    for (let i = 0; i < 300 && after.running !== 0; i++) {
      await new Promise(r => setTimeout(r, 100))
      after = await serverMetrics(server!)
    }
    t.equal(after.running, 0, 'nothing is generating on the server any more')
    const generated = after.generated - before.generated
    t.comment(`generated before the cancel took effect: ${generated} tokens; endings: ${after.endings}`)
    t.ok(generated < 2048, `the generation was cut short (${generated} of up to ~4000 tokens)`)

    // Escape stops too.
    await send(page, 'Once more, please.')
    await page.locator('.msg-assistant').last().locator('.answer .markdown').filter({hasText: /\S/}).waitFor()
    await page.keyboard.press('Escape')
    await answerDone(page)
    t.ok((await lastAnswer(page)).stopped, 'Escape stops the answer')
    await steer(page, {temperature: 0, max_tokens: 1000})
    await shot('04-stopped')
  })

  t.test('attach an image (file picker), a PDF (drop) and an image (paste)', async t => {
    await page.locator('#new-chat').click()
    const png = makePng(48, 32)
    const file = path.join(dir, 'gradient.png')
    await writeFile(file, png)
    await page.locator('#file-input').setInputFiles(file)
    await page.locator('#attachments .chip').filter({hasText: 'gradient.png'}).waitFor()

    // Drag and drop and paste go through the same reader; check both add a chip, then remove them.
    const pdf = makePdf('Hello PDF').toString('base64')
    const small = makePng(16, 16).toString('base64')
    await page.evaluate(async ({pdf: b64, png}) => {
      const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0))
      const drop = new DataTransfer()
      drop.items.add(new File([bytes], 'notes.pdf', {type: 'application/pdf'}))
      window.dispatchEvent(new DragEvent('dragenter', {dataTransfer: drop}))
      window.dispatchEvent(new DragEvent('drop', {dataTransfer: drop, cancelable: true}))
      const paste = new DataTransfer()
      paste.items.add(new File([Uint8Array.from(atob(png), c => c.charCodeAt(0))], 'pasted.png', {type: 'image/png'}))
      document.getElementById('prompt')!.dispatchEvent(new ClipboardEvent('paste', {clipboardData: paste, cancelable: true, bubbles: true}))
    }, {pdf, png: small})
    await page.locator('#attachments .chip').filter({hasText: 'notes.pdf'}).waitFor()
    await page.locator('#attachments .chip').filter({hasText: 'pasted.png'}).waitFor()
    t.equal(await page.locator('#drop-hint').isHidden(), true, 'the drop hint goes away after the drop')
    await shot('05-attachments')
    await page.getByRole('button', {name: 'Remove notes.pdf'}).click()
    await page.getByRole('button', {name: 'Remove pasted.png'}).click()
    t.equal(await page.locator('#attachments .chip').count(), 1)

    await page.locator('#prompt').fill('What is in this picture?')
    const request = page.waitForRequest(isChat)
    const response = page.waitForResponse(r => isChat(r.request()))
    await page.locator('#prompt').press('Enter')
    const body = (await request).postDataJSON()
    const content = body.messages.at(-1).content
    t.same(content[0], {type: 'text', text: 'What is in this picture?'})
    t.same(content[1], {type: 'image_url', image_url: {url: `data:image/png;base64,${png.toString('base64')}`}}, 'the PNG as a data URL')
    t.equal(await page.locator('#attachments .chip').count(), 0, 'attachments go with the message')
    const reply = await response
    await answerDone(page)
    const answer = await lastAnswer(page)
    t.comment(`image request: HTTP ${reply.status()}${answer.error ? `, ${answer.error}` : ''}`)
    if (reply.status() === 200) {
      t.equal(answer.error, '', 'no error')
      t.ok(answer.text.length > 0, 'an answer came back')
    } else {
      // A package without a vision tower refuses images (400); the page shows the server's own words.
      const refusal = (await reply.json()).error.message as string
      t.equal(answer.error, `Error: ${refusal}`, 'the refusal is shown in the conversation')
    }
    const img = page.locator('.msg-user .att-image img').last()
    t.equal(await img.getAttribute('alt'), 'gradient.png')
    t.ok(await img.evaluate(el => (el as HTMLImageElement).naturalWidth === 48), 'the picture shows in the conversation')
    await shot('06-image')
    if (reply.status() !== 200) {
      // Editing can drop the picture the model refused; the text goes again on its own.
      await page.locator('.msg-user').last().getByRole('button', {name: 'Edit'}).click()
      await page.getByRole('button', {name: 'Remove gradient.png'}).click()
      const again = page.waitForRequest(isChat)
      await page.getByRole('button', {name: 'Save and resend'}).click()
      t.same((await again).postDataJSON().messages.at(-1), {role: 'user', content: 'What is in this picture?'}, 'without the image')
      await answerDone(page)
      t.equal((await lastAnswer(page)).error, '')
      t.equal(await page.locator('.msg-user .att-image').count(), 0)
      // Put the picture back for the reload check below (the server refuses it again; that is fine).
      await page.locator('#file-input').setInputFiles(file)
      await send(page, 'And this one?')
      await answerDone(page)
    }
  })

  t.test('reload and find the conversations', async t => {
    await page.reload()
    await page.locator('#st-model').filter({hasText: model.id}).waitFor()
    t.equal(await page.locator('.conv-item').count(), 4, 'four conversations')
    t.match(await page.locator('.conv-item.current .conv-open').textContent(), /^What is in this picture/, 'the last one is open')
    t.equal(await page.locator('.msg-user .att-image img').count(), 1, 'its picture is kept')
    await page.locator('.conv-open', {hasText: 'Tell me a story about the sea.'}).click()
    t.equal(await page.locator('.msg-user .user-text').first().textContent(), first.question)
    t.equal(await page.locator('.msg-assistant .answer .markdown').first().textContent(), first.text, 'the answer is as it was')
    t.equal(await page.locator('#effort').inputValue(), 'none', 'the reasoning effort is remembered')
    t.match(await page.locator('#st-context').textContent(), /^Context: /, 'the status line shows the last answer')
    await shot('07-reloaded')
  })

  t.test('regenerate, edit and resend', async t => {
    const regen = page.waitForRequest(isChat)
    await page.getByRole('button', {name: 'Regenerate'}).click()
    t.same((await regen).postDataJSON().messages, [{role: 'user', content: first.question}], 'the same question again')
    await answerDone(page)
    t.equal(await page.locator('.msg').count(), 2, 'the answer was replaced')

    await page.locator('.msg-user').getByRole('button', {name: 'Edit'}).click()
    const editor = page.getByRole('textbox', {name: 'Edit message'})
    await editor.fill('Hello again')
    const edited = page.waitForRequest(isChat)
    await page.getByRole('button', {name: 'Save and resend'}).click()
    t.same((await edited).postDataJSON().messages, [{role: 'user', content: 'Hello again'}])
    await answerDone(page)
    t.equal(await page.locator('.msg').count(), 2)
    t.equal(await page.locator('.msg-user .user-text').textContent(), 'Hello again')

    // A follow-up carries the history, and the system prompt goes first.
    await page.locator('#settings > summary').click()
    await page.locator('#system-prompt').fill('Answer briefly.')
    await page.locator('#system-prompt').blur()
    const follow = await send(page, 'And then?')
    t.same(follow.messages.map((m: {role: string}) => m.role), ['system', 'user', 'assistant', 'user'])
    t.equal(follow.messages[0].content, 'Answer briefly.')
    await answerDone(page)
    await page.locator('#settings > summary').click()
  })

  t.test('rename, export and delete', async t => {
    const item = page.locator('.conv-item.current')
    await item.getByRole('button', {name: /^Rename/}).click()
    await page.getByRole('textbox', {name: 'Name'}).fill('Greetings')
    await page.getByRole('button', {name: 'Rename', exact: true}).click()
    // the dialog's close event renames after the click returns
    await page.locator('.conv-item.current .conv-open').filter({hasText: /^Greetings$/}).waitFor({timeout: 5000}).catch(() => {})
    t.equal(await page.locator('.conv-item.current .conv-open').textContent(), 'Greetings')
    t.equal(await page.locator('#conv-title').textContent(), 'Greetings')

    const download = page.waitForEvent('download')
    await page.getByRole('button', {name: 'Export', exact: true}).click()
    const saved = path.join(dir, 'export.json')
    await (await download).saveAs(saved)
    const exported = JSON.parse(await (await import('node:fs/promises')).readFile(saved, 'utf8'))
    t.equal(exported.title, 'Greetings')
    t.equal(exported.system, 'Answer briefly.')
    t.same(exported.messages.map((m: {role: string}) => m.role), ['user', 'assistant', 'user', 'assistant'])

    const all = page.waitForEvent('download')
    await page.getByRole('button', {name: 'Export all as JSON'}).click()
    await (await all).saveAs(saved)
    const everything = JSON.parse(await (await import('node:fs/promises')).readFile(saved, 'utf8'))
    t.equal(everything.conversations.length, 4)

    page.once('dialog', d => d.accept())
    await page.locator('.conv-item', {hasText: 'Tell me a very long story'}).getByRole('button', {name: /^Delete/}).click()
    await page.locator('.conv-item', {hasText: 'Tell me a very long story'}).waitFor({state: 'detached'})
    t.equal(await page.locator('.conv-item').count(), 3)
    await page.reload()
    t.equal(await page.locator('.conv-item').count(), 3, 'the deletion is kept')
  })

  t.test('Markdown is rendered and sanitised; code blocks have a working copy button', async t => {
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], {origin: server!.url})
    const rendered = await page.evaluate(async () => {
      const {renderMarkdown} = await import('/assets/js/markdown.js' as string)
      const article = document.createElement('article')
      article.className = 'msg msg-assistant test-md'
      const target = document.createElement('div')
      article.append(target)
      document.getElementById('messages')!.append(article)
      renderMarkdown(
        target,
        [
          '# Title',
          '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">',
          '<iframe src="javascript:window.__pwned=3"></iframe>',
          '[click](javascript:window.__pwned=4) [ok](https://example.com/a) ![pic](https://example.com/p.png)',
          '```python\ndef f(x):\n    return x + 1\n```',
          '| a | b |\n|---|---|\n| 1 | 2 |',
        ].join('\n\n'),
      )
      await new Promise(r => setTimeout(r, 50))
      const all = [...target.querySelectorAll('*')]
      return {
        html: target.innerHTML,
        tags: [...new Set(all.map(e => e.tagName.toLowerCase()))].sort(),
        handlers: all.flatMap(e => [...e.attributes].map(a => a.name)).filter(n => n.startsWith('on')),
        hrefs: all.filter(e => e.hasAttribute('href')).map(e => e.getAttribute('href')),
      }
    })
    t.equal(await page.evaluate(() => (window as unknown as {__pwned?: number}).__pwned), undefined, 'nothing from the model ran')
    t.same(rendered.tags.filter(x => ['script', 'img', 'iframe', 'object', 'embed', 'style'].includes(x)), [], 'no raw HTML elements')
    t.same(rendered.handlers, [], 'no event handler attributes')
    t.same(rendered.hrefs, ['https://example.com/a', 'https://example.com/p.png'], 'only http(s) links; the image is a link')
    const html = rendered.html
    t.match(html, /&lt;script&gt;/, 'raw HTML shows as text')
    t.match(html, /<a href="https:\/\/example\.com\/a" target="_blank" rel="noopener noreferrer">ok<\/a>/)
    t.match(html, /<h1>Title<\/h1>/)
    t.match(html, /<table>/)
    t.match(html, /<span class="hljs-keyword">def<\/span>/, 'code is highlighted')
    const copy = page.locator('.test-md').getByRole('button', {name: 'Copy python code'})
    await copy.click()
    t.equal(await page.evaluate(() => navigator.clipboard.readText()), 'def f(x):\n    return x + 1')
    t.equal(await copy.textContent(), 'Copied')
    await page.evaluate(() => document.querySelector('.test-md')!.remove())
  })

  t.test('accessible: names, keyboard focus, contrast', async t => {
    const unnamed = await page.evaluate(() => {
      const nameOf = (el: Element) => {
        const aria = el.getAttribute('aria-label')
        if (aria) return aria
        const by = el.getAttribute('aria-labelledby')
        if (by) return document.getElementById(by)?.textContent ?? ''
        const labels = (el as HTMLInputElement).labels
        if (labels && labels.length) return labels[0].textContent ?? ''
        return (el.textContent ?? '').trim() || el.getAttribute('title') || ''
      }
      return [...document.querySelectorAll('button, input, select, textarea, a[href], summary')]
        .filter(el => !el.closest('dialog:not([open])') && !(el as HTMLElement).hidden)
        .filter(el => !nameOf(el).trim())
        .map(el => el.outerHTML.slice(0, 80))
    })
    t.same(unnamed, [], 'every control has a name')

    await page.locator('#prompt').focus()
    await page.keyboard.press('Tab')
    const focused = await page.evaluate(() => {
      const el = document.activeElement as HTMLElement
      return {id: el.id, outline: getComputedStyle(el).outlineStyle}
    })
    t.equal(focused.id, 'send', 'Tab goes from the message box to Send')
    t.not(focused.outline, 'none', 'the focused control shows a focus ring')

    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({colorScheme: scheme})
      const pairs = await page.evaluate(() => {
        const style = (sel: string) => getComputedStyle(document.querySelector(sel)!)
        const bg = style('body').backgroundColor
        return {
          body: [style('body').color, bg],
          soft: [style('.msg-role').color, bg],
          status: [style('.statusline').color, style('.statusline').backgroundColor],
          primary: [style('#send').color, style('#send').backgroundColor],
          user: [style('.msg-user .user-text').color, style('.msg-user .user-text').backgroundColor],
        }
      })
      for (const [name, [fg, bg]] of Object.entries(pairs)) {
        const ratio = contrast(fg, bg)
        t.ok(ratio >= 4.5, `${scheme} ${name}: contrast ${ratio.toFixed(2)} ≥ 4.5`)
      }
      await shot(`08-${scheme}`)
    }
    await page.emulateMedia({colorScheme: 'light'})
  })

  t.test('usable on a narrow window', async t => {
    await page.emulateMedia({reducedMotion: 'reduce'})
    await page.setViewportSize({width: 380, height: 760})
    t.ok(await page.locator('#sidebar').isHidden(), 'the conversation list folds away')
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)
    t.equal(overflow, 0, 'no sideways scrolling')
    await shot('09-narrow')
    await page.getByRole('button', {name: 'Show conversations'}).click()
    await page.locator('#sidebar').waitFor({state: 'visible'})
    t.equal(await page.evaluate(() => document.activeElement?.id), 'new-chat', 'focus moves into the list')
    await shot('10-narrow-list')
    await page.keyboard.press('Escape')
    await page.locator('#sidebar').waitFor({state: 'hidden'})
    await page.setViewportSize({width: 1280, height: 860})
  })

  t.test('no errors in the page', async t => {
    t.same(pageErrors, [])
  })
})

t.test('with an API key the page asks for it once and keeps it', async t => {
  // Needs the page and its assets to load without the key (src/server/security.ts: routes with config.public).
  if (!haveChromium()) {
    t.fail('Chromium is missing: run scripts/setup-system.sh')
    return
  }
  const dir = await mkdtemp(path.join(tmpdir(), 'splash-webui-key-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  const pkg = path.join(dir, 'package')
  const synth = await runCli(['package', 'synth', '--preset', 'tiny-hybrid', '--out', pkg], {}, 300_000)
  t.equal(synth.code, 0, 'package synth --preset tiny-hybrid', {stderr: synth.stderr})
  if (synth.code !== 0) return
  const KEY = 'sk-webui-test'
  let server: ServerProcess | undefined
  let browser: Browser | undefined
  t.teardown(async () => {
    await browser?.close()
    await stopServer(server)
  })
  server = await startServe(['--model', pkg, '--api-key', KEY, ...SERVE_ARGS])
  browser = await launchChromium()
  const context = await browser.newContext({viewport: {width: 1280, height: 860}})
  context.setDefaultTimeout(60_000)
  const page = await context.newPage()
  await steer(page, {temperature: 0, max_tokens: 200})
  const shot = async (name: string) => t.comment(`screenshot: ${await screenshot(page, name)}`)

  const loaded = await page.goto(server.url)
  t.equal(loaded?.status(), 200, 'the page loads without the key')
  if (loaded?.status() !== 200) return
  const dialog = page.getByRole('dialog', {name: 'API key'})
  await dialog.waitFor()
  await shot('11-key-dialog')
  await page.getByLabel('Key', {exact: true}).fill('wrong-key')
  await page.getByRole('button', {name: 'Save'}).click()
  await page.getByText('The server refused this key').waitFor()
  await page.getByLabel('Key', {exact: true}).fill(KEY)
  await page.getByRole('button', {name: 'Save'}).click()
  await dialog.waitFor({state: 'hidden'})
  await page.locator('#st-model').filter({hasText: 'splash/'}).waitFor()
  t.equal(await page.evaluate(() => localStorage.getItem('splash.apiKey')), KEY, 'kept in the browser')

  await page.reload()
  await page.locator('#st-model').filter({hasText: 'splash/'}).waitFor()
  t.ok(await dialog.isHidden(), 'not asked again after a reload')
  await page.locator('#effort').selectOption('none')
  await page.locator('#prompt').fill('Hi')
  const request = page.waitForRequest(isChat)
  await page.locator('#prompt').press('Enter')
  t.equal((await request).headers().authorization, `Bearer ${KEY}`, 'sent as a Bearer token')
  await answerDone(page)
  const answer = await lastAnswer(page)
  t.equal(answer.error, '')
  t.ok(answer.text.length > 0, 'the answer streamed')
  await shot('12-key-answer')
})

t.test('a package without a vision encoder: the page offers PDFs only and sends no image', async t => {
  if (!haveChromium()) {
    t.fail('Chromium is missing: run scripts/setup-system.sh')
    return
  }
  const dir = await mkdtemp(path.join(tmpdir(), 'splash-webui-text-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  const pkg = path.join(dir, 'package')
  const synth = await runCli(['package', 'synth', '--preset', 'tiny-hybrid', '--out', pkg], {}, 300_000)
  t.equal(synth.code, 0, 'package synth --preset tiny-hybrid', {stderr: synth.stderr})
  if (synth.code !== 0) return
  let server: ServerProcess | undefined
  let browser: Browser | undefined
  t.teardown(async () => {
    await browser?.close()
    await stopServer(server)
  })
  server = await startServe(['--model', pkg, ...SERVE_ARGS])
  const models = (await (await fetch(`${server.url}/v1/models`)).json()) as {data: Array<{id: string; input_modalities: string[]}>}
  t.same(models.data[0].input_modalities, ['text'], 'the server says the package takes no images')
  browser = await launchChromium()
  const context = await browser.newContext({viewport: {width: 1280, height: 860}})
  context.setDefaultTimeout(60_000)
  const page = await context.newPage()
  await steer(page, {temperature: 0, max_tokens: 50})
  await page.goto(server.url)
  await page.locator('#st-model').filter({hasText: models.data[0].id}).waitFor()
  t.equal(await page.locator('#st-model').textContent(), `Model: ${models.data[0].id} · text only`, 'the status line says the model takes no images')
  t.equal(await page.locator('#file-input').getAttribute('accept'), 'application/pdf,.pdf', 'the picker offers PDFs only')
  t.equal(await page.locator('label.attach').getAttribute('title'), 'Attach PDFs')
  t.match(await page.locator('#composer-help').textContent(), /paste or drop PDFs to attach them$/)
  t.notMatch(await page.locator('#composer-help').textContent(), /image/, 'no word of images')
  t.equal(await page.locator('#drop-hint').textContent(), 'Drop PDFs to attach them')
  // an image dropped or pasted anyway is refused on the page, with the reason; a PDF is taken
  const png = makePng(16, 16).toString('base64')
  const pdf = makePdf('Hello PDF').toString('base64')
  await page.evaluate(async ({png: p, pdf: d}) => {
    const drop = new DataTransfer()
    drop.items.add(new File([Uint8Array.from(atob(p), c => c.charCodeAt(0))], 'photo.png', {type: 'image/png'}))
    drop.items.add(new File([Uint8Array.from(atob(d), c => c.charCodeAt(0))], 'notes.pdf', {type: 'application/pdf'}))
    window.dispatchEvent(new DragEvent('dragenter', {dataTransfer: drop}))
    window.dispatchEvent(new DragEvent('drop', {dataTransfer: drop, cancelable: true}))
  }, {png, pdf})
  await page.locator('#attachments .chip').filter({hasText: 'notes.pdf'}).waitFor()
  await page.getByText('photo.png: this model has no vision encoder, so it takes no images (PDFs are read as text)').first().waitFor()
  t.equal(await page.locator('#attachments .chip').count(), 1, 'only the PDF is attached')
  const body = await send(page, 'Summarise this')
  const content = body.messages.at(-1).content as Array<{type: string}>
  t.same(content.map(c => c.type), ['text', 'file'], 'the text and the PDF, no image')
  await answerDone(page)
  t.equal((await lastAnswer(page)).error, '', 'answered')
  t.comment(`screenshot: ${await screenshot(page, '13-text-only')}`)
})
