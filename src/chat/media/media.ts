// Images and documents in a chat prompt, from the content parts the APIs send to what the engine runs: remote URLs
// fetched (only when the server allows it), PDFs turned into page-marked text on worker threads (and page images for a model with a
// vision encoder), images prepared by the family's vision side, and the prompt's multimodal fields — embeddings that
// replace image-pad rows, M-RoPE positions, and a content hash per image span for the prefix cache.
import {errors} from '../../errors.js'
import type {ChatContentPart, ChatMessage, MediaOptions, MediaSource} from '../types.js'
import {PDF_DEFAULTS} from './pdf.js'
import {readPdfOffThread} from './pdf-pool.js'

export type {MediaOptions, MediaSource} from '../types.js'

/** An image prepared for the encoder (the family's processor ran on it). */
export interface PreparedImage {
  /** Encoder input, [t·h·w × patchDim]. */
  pixels: Float32Array
  /** [t, h, w] in patches. */
  grid: [number, number, number]
  /** Content hash of the prepared pixels and grid (sha256 hex). */
  hash: string
  /** The part it came from (for errors). */
  where: string
}

/** Why an image is refused by a package without a vision tower, and the way out. */
export const NO_VISION =
  'this package has no vision encoder, so it does not accept images; to send images, serve a package that has one (`splash serve --model <package>`, whose splash.json has a "vision" tower)'

/** What a family with a vision encoder provides. */
export interface VisionFamily {
  /** Decodes, checks and preprocesses one image (off the event loop); throws a 400 naming `where`. */
  prepare(bytes: Uint8Array, where: string, maxImagePixels: number): Promise<PreparedImage>
  /** Expands each image's single pad token in the rendered ids to its span and computes the positions. */
  layout(tokens: readonly number[], images: readonly PreparedImage[]): {tokens: number[]; spans: Array<{start: number; length: number}>; positions: Int32Array; ropeDelta: number}
  close(): Promise<void>
}

export const MEDIA_DEFAULTS: MediaOptions = {maxImagePixels: 4194304, fetchUrls: false}
const MAX_FETCH_BYTES = 32 * 1024 * 1024
const FETCH_TIMEOUT_MS = 15_000

/** The bytes of an image part: inline data, or the URL fetched when allowed. */
export async function mediaBytes(src: MediaSource, where: string, o: MediaOptions): Promise<Uint8Array> {
  if (src.data) return src.data
  const url = src.url!
  if (!/^https?:\/\//i.test(url)) throw errors.invalidRequest(`${where}: only data: URLs and http(s) URLs are accepted`, where)
  if (!o.fetchUrls) {
    throw errors.invalidRequest(`${where}: this server does not fetch image URLs (start it with --allow-image-urls); send the image as a data: URL or base64`, where)
  }
  let res: Response
  try {
    res = await fetch(url, {signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), redirect: 'follow'})
  } catch (err) {
    throw errors.invalidRequest(`${where}: the image URL could not be fetched (${(err as Error).message})`, where)
  }
  if (!res.ok) throw errors.invalidRequest(`${where}: fetching the image URL answered HTTP ${res.status}`, where)
  const len = Number(res.headers.get('content-length') ?? 0)
  if (len > MAX_FETCH_BYTES) throw errors.invalidRequest(`${where}: the image at the URL is larger than ${MAX_FETCH_BYTES} bytes`, where)
  const buf = new Uint8Array(await res.arrayBuffer())
  if (buf.length > MAX_FETCH_BYTES) throw errors.invalidRequest(`${where}: the image at the URL is larger than ${MAX_FETCH_BYTES} bytes`, where)
  return buf
}

/** Decodes a data: URL (base64 or percent-encoded) into its media type and bytes; undefined for other URLs. */
export function parseDataUrl(url: string, where: string): {mediaType: string; data: Uint8Array} | undefined {
  if (!url.startsWith('data:')) return undefined
  const comma = url.indexOf(',')
  if (comma < 0) throw errors.invalidRequest(`${where}: malformed data: URL (no comma)`, where)
  const head = url.slice(5, comma)
  const body = url.slice(comma + 1)
  const base64 = /;base64$/i.test(head)
  const mediaType = (base64 ? head.slice(0, -7) : head).split(';')[0].trim().toLowerCase() || 'text/plain'
  return {mediaType, data: base64 ? decodeBase64(body, where) : new TextEncoder().encode(decodeURIComponent(body))}
}

/** Strict base64 (standard or URL-safe alphabet, padding optional, whitespace ignored). */
export function decodeBase64(text: string, where: string): Uint8Array {
  const clean = text.replace(/\s+/g, '')
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(clean) || clean.length % 4 === 1) throw errors.invalidRequest(`${where}: the data is not valid base64`, where)
  return new Uint8Array(Buffer.from(clean, 'base64'))
}

/** A PDF as prompt content: text parts with page markers, and page images where a page has no text and `render`. */
export async function pdfParts(
  data: Uint8Array,
  where: string,
  name: string | undefined,
  render: boolean,
  maxImagePixels = PDF_DEFAULTS.renderPixels,
): Promise<Array<{type: 'text'; text: string} | {type: 'page_image'; png: Uint8Array; where: string}>> {
  const pages = await readPdfOffThread(data, where, {...PDF_DEFAULTS, render, renderPixels: Math.min(PDF_DEFAULTS.renderPixels, maxImagePixels)})
  const label = name ? `PDF "${name}"` : 'PDF'
  const out: Array<{type: 'text'; text: string} | {type: 'page_image'; png: Uint8Array; where: string}> = []
  out.push({type: 'text', text: `[${label}, ${pages.length} page${pages.length === 1 ? '' : 's'}]\n`})
  for (const p of pages) {
    if (p.png) {
      out.push({type: 'text', text: `[Page ${p.page}]\n`})
      out.push({type: 'page_image', png: p.png, where: `${where} page ${p.page}`})
      out.push({type: 'text', text: '\n'})
    } else {
      out.push({type: 'text', text: `[Page ${p.page}]\n${p.text || '(no text on this page)'}\n`})
    }
  }
  out.push({type: 'text', text: `[End of ${label}]`})
  return out
}

/**
 * Resolves the media parts of a conversation: documents become text parts (and page images when the model can see),
 * image bytes are fetched or decoded and prepared in parallel. Returns the messages with plain `{type: 'image'}`
 * placeholders, in prompt order, and the prepared images in the same order.
 */
export async function resolveMedia(messages: ChatMessage[], vision: VisionFamily | undefined, o: MediaOptions): Promise<{messages: ChatMessage[]; images: PreparedImage[]}> {
  const jobs: Array<Promise<PreparedImage>> = []
  const image = (bytes: () => Promise<Uint8Array>, where: string) => {
    if (!vision) throw errors.invalidRequest(`${where}: ${NO_VISION}`, where, 'images_not_supported')
    const job = bytes().then(b => vision.prepare(b, where, o.maxImagePixels))
    job.catch(() => undefined) // observed below; a later part's error must not leave it unhandled
    jobs.push(job)
  }
  const out: ChatMessage[] = []
  for (const m of messages) {
    if (!Array.isArray(m.content)) {
      out.push(m)
      continue
    }
    const parts: ChatContentPart[] = []
    for (const p of m.content) {
      if (p.type === 'image') {
        if (!p.source) throw errors.invalidRequest('an image part carries no image')
        const src = p.source
        image(() => mediaBytes(src, p.where, o), p.where)
        parts.push({type: 'image'})
      } else if (p.type === 'document') {
        if (p.mediaType !== 'application/pdf') {
          throw errors.invalidRequest(`${p.where}: documents of type ${p.mediaType || 'unknown'} are not supported; send a PDF (application/pdf)`, p.where)
        }
        for (const q of await pdfParts(p.data, p.where, p.name, vision !== undefined, o.maxImagePixels)) {
          if (q.type === 'text') parts.push(q)
          else {
            image(() => Promise.resolve(q.png), q.where)
            parts.push({type: 'image'})
          }
        }
      } else {
        parts.push(p)
      }
    }
    out.push({...m, content: parts})
  }
  // settle every job so none is left rejecting unobserved, then report the first failure
  const settled = await Promise.allSettled(jobs)
  const failed = settled.find(s => s.status === 'rejected')
  if (failed) throw (failed as PromiseRejectedResult).reason
  return {messages: out, images: settled.map(s => (s as PromiseFulfilledResult<PreparedImage>).value)}
}
