// Image and file parts of the three wire formats → the core's content parts. Only the shapes are handled here:
// data: URLs and base64 are decoded, http(s) URLs are passed on (the core fetches them only when the server allows
// it), and a file is a document when it is a PDF, an image when it is one. Every error names the part.
import {errors} from '../../src/errors.js'
import type {ChatContentPart} from '../../src/chat/chat.js'
import {decodeBase64, MEDIA_DEFAULTS, parseDataUrl, type MediaOptions} from '../../src/chat/media/media.js'

const bad = (where: string, message: string) => errors.invalidRequest(`${where}: ${message}`, where)

/** What a file is from its leading bytes (the declared type is not trusted alone). */
function sniff(data: Uint8Array): 'pdf' | 'image' | undefined {
  const head = String.fromCharCode(...data.subarray(0, 12))
  if (head.startsWith('%PDF-')) return 'pdf'
  if (head.startsWith('\x89PNG') || head.startsWith('\xff\xd8\xff') || head.startsWith('GIF8') || (head.startsWith('RIFF') && head.slice(8, 12) === 'WEBP')) return 'image'
  return undefined
}

function fromBytes(data: Uint8Array, mediaType: string, where: string, name?: string): ChatContentPart {
  const kind = sniff(data)
  if (mediaType === 'application/pdf' || kind === 'pdf') return {type: 'document', data, mediaType: 'application/pdf', name, where}
  if (mediaType.startsWith('image/') || kind === 'image') return {type: 'image', source: {data}, where}
  throw bad(where, `files of type ${mediaType || 'unknown'} are not supported; send a PDF or an image`)
}

/** An image given by URL: a data: URL (decoded here) or an http(s) URL (fetched by the core when allowed). */
export function imageFromUrl(url: string, where: string): ChatContentPart {
  const d = parseDataUrl(url, where)
  if (d) {
    if (!d.mediaType.startsWith('image/') && d.mediaType !== 'application/pdf' && !sniff(d.data)) {
      throw bad(where, `the data: URL holds ${d.mediaType}, not an image`)
    }
    return fromBytes(d.data, d.mediaType, where)
  }
  if (/^https?:\/\//i.test(url)) return {type: 'image', source: {url}, where}
  throw bad(where, 'an image URL must be a data: URL or an http(s) URL')
}

/** A file given inline: a data: URL, or bare base64 with the media type from `mediaType` or the bytes themselves. */
export function fileFromData(fileData: string, where: string, name?: string, mediaType = ''): ChatContentPart {
  const d = parseDataUrl(fileData, where)
  if (d) return fromBytes(d.data, d.mediaType, where, name)
  return fromBytes(decodeBase64(fileData, where), mediaType.toLowerCase(), where, name)
}

/** The server's media settings, as every API passes them to the core. */
export function mediaOptionsOf(o: {maxImagePixels?: number; allowImageUrls?: boolean}): MediaOptions {
  return {maxImagePixels: o.maxImagePixels ?? MEDIA_DEFAULTS.maxImagePixels, fetchUrls: o.allowImageUrls === true}
}
