// The core's media helpers: data URLs and base64, the prefix-cache key of an image prompt, and the resolution of a
// conversation's media parts (documents on a text-only family, images refused without a vision encoder).
import t from 'tap'
import {decodeBase64, parseDataUrl, resolveMedia, MEDIA_DEFAULTS} from '../../../src/chat/media/media.js'
import {cacheKeyOf, type PromptMedia} from '../../../src/engine/prompt-media.js'
import {makePdf} from '../../helpers/pdf.js'

t.test('data URLs and base64', async t => {
  t.same(parseDataUrl('data:image/png;base64,aGk=', 'p'), {mediaType: 'image/png', data: new Uint8Array([104, 105])})
  t.same(parseDataUrl('data:,a%20b', 'p'), {mediaType: 'text/plain', data: new TextEncoder().encode('a b')})
  t.equal(parseDataUrl('https://x/y.png', 'p'), undefined)
  t.throws(() => parseDataUrl('data:image/png;base64', 'p'), {status: 400, message: /p: malformed data: URL/})
  t.same(decodeBase64('aG k=\n', 'p'), new Uint8Array([104, 105]), 'whitespace ignored')
  t.same(decodeBase64('_-8', 'p'), new Uint8Array([255, 239]), 'URL-safe alphabet, no padding')
  t.throws(() => decodeBase64('a$b=', 'p'), {status: 400, message: /p: the data is not valid base64/})
})

t.test('cache key: pads carry the image hash, text is unchanged', async t => {
  const prompt = Int32Array.from([5, 6, 9, 9, 9, 9, 7])
  const media = (hash: string): PromptMedia => ({spans: [{start: 2, length: 4, hash, embeds: new Float32Array(0)}], positions: new Int32Array(21), ropeDelta: 0})
  const a = cacheKeyOf({prompt, media: media('0123456789abcdef0123456789abcdef')})
  const b = cacheKeyOf({prompt, media: media('0123456789abcdef0123456789abcdef')})
  const c = cacheKeyOf({prompt, media: media('f123456789abcdef0123456789abcdef')})
  t.same(Array.from(a.subarray(0, 2)), [5, 6])
  t.equal(a[6], 7)
  t.ok(Array.from(a.subarray(2, 6)).every(x => x < 0), 'pad rows get negative ids (never a real token)')
  t.same(a, b, 'same image, same key')
  t.not(a[2], c[2], 'another image, another key')
  t.equal(cacheKeyOf({prompt}), prompt, 'a text prompt is its own key')
})

t.test('resolveMedia: PDFs on any family, images only with a vision encoder', async t => {
  const pdf = new Uint8Array(makePdf('Quarterly figures'))
  const r = await resolveMedia(
    [{role: 'user', content: [{type: 'text', text: 'Read: '}, {type: 'document', data: pdf, mediaType: 'application/pdf', name: 'q.pdf', where: 'm[0].c[1]'}]}],
    undefined,
    MEDIA_DEFAULTS,
  )
  t.equal(r.images.length, 0)
  const text = (r.messages[0].content as Array<{type: string; text?: string}>).map(p => p.text ?? '').join('')
  t.equal(text, 'Read: [PDF "q.pdf", 1 page]\n[Page 1]\nQuarterly figures\n[End of PDF "q.pdf"]')
  await t.rejects(
    resolveMedia([{role: 'user', content: [{type: 'image', source: {data: new Uint8Array(4)}, where: 'm[0].c[0]'}]}], undefined, MEDIA_DEFAULTS),
    {status: 400, code: 'images_not_supported', message: /m\[0\]\.c\[0\]: this package has no vision encoder, so it does not accept images; to send images, serve a package that has one \(`splash serve --model <package>`/},
  )
  await t.rejects(
    resolveMedia([{role: 'user', content: [{type: 'document', data: new Uint8Array(4), mediaType: 'text/csv', where: 'd'}]}], undefined, MEDIA_DEFAULTS),
    {status: 400, message: /d: documents of type text\/csv are not supported/},
  )
})
