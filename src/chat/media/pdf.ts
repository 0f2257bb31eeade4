// Inline PDFs: text page by page with pdfjs-dist (legacy build, the one that runs on Node 20), and pages without a
// text layer rendered to PNG with @napi-rs/canvas so a model with a vision encoder can read them. Encrypted or
// malformed files are refused with a 400 naming the part. Runs on a worker thread (pdf-pool.ts, pdf-worker.ts).
import {createRequire} from 'node:module'
import {dirname, join} from 'node:path'
import {errors, SplashError} from '../../errors.js'

export interface PdfPage {
  /** 1-based page number. */
  page: number
  /** The page's text layer ('' when it has none). */
  text: string
  /** The page rendered to PNG: only pages without text, only when asked, at most `renderLimit` of them. */
  png?: Uint8Array
}

export interface PdfOptions {
  /** Render pages that have no text layer (the model has a vision encoder). */
  render: boolean
  /** Most pages rendered per document (memory guard). */
  renderLimit: number
  /** Most pages read per document. */
  pageLimit: number
  /** Longest side of a rendered page, in pixels. */
  renderSide: number
  /** Most pixels of a rendered page (the server's image cap). */
  renderPixels: number
}

export const PDF_DEFAULTS: PdfOptions = {render: false, renderLimit: 8, pageLimit: 500, renderSide: 1024, renderPixels: 1024 * 1024}

type PdfJs = typeof import('pdfjs-dist/legacy/build/pdf.mjs')
let pdfjs: Promise<PdfJs> | undefined
const fontsUrl = () => join(dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json')), 'standard_fonts') + '/'

export async function readPdf(data: Uint8Array, where: string, o: PdfOptions = PDF_DEFAULTS): Promise<PdfPage[]> {
  if (!(data.length > 4 && String.fromCharCode(...data.subarray(0, 5)) === '%PDF-')) {
    throw errors.invalidRequest(`${where}: the file is not a PDF (no %PDF- header)`, where)
  }
  pdfjs ??= import('pdfjs-dist/legacy/build/pdf.mjs')
  const lib = await pdfjs
  // pdfjs takes ownership of the buffer it is given: hand it a copy
  const task = lib.getDocument({data: new Uint8Array(data), isEvalSupported: false, standardFontDataUrl: fontsUrl(), verbosity: 0})
  let doc: Awaited<typeof task.promise>
  try {
    doc = await task.promise
  } catch (err) {
    await task.destroy().catch(() => undefined)
    const name = (err as Error).name
    if (name === 'PasswordException') throw errors.invalidRequest(`${where}: the PDF is encrypted (password protected); send an unencrypted file`, where)
    throw errors.invalidRequest(`${where}: the PDF is malformed (${(err as Error).message})`, where)
  }
  try {
    if (doc.numPages > o.pageLimit) {
      throw errors.invalidRequest(`${where}: the PDF has ${doc.numPages} pages; at most ${o.pageLimit} are read`, where)
    }
    const pages: PdfPage[] = []
    let rendered = 0
    for (let n = 1; n <= doc.numPages; n++) {
      const page = await doc.getPage(n)
      const content = await page.getTextContent()
      let text = ''
      for (const item of content.items) if ('str' in item) text += item.str + (item.hasEOL ? '\n' : '')
      text = text.trim()
      const out: PdfPage = {page: n, text}
      if (!text && o.render && rendered < o.renderLimit) {
        out.png = await renderPage(page, o.renderSide, o.renderPixels)
        rendered++
      }
      pages.push(out)
      page.cleanup()
    }
    return pages
  } catch (err) {
    if (err instanceof SplashError) throw err
    throw errors.invalidRequest(`${where}: the PDF could not be read (${(err as Error).message})`, where)
  } finally {
    await doc.destroy()
  }
}

type PdfPageProxy = Awaited<ReturnType<Awaited<ReturnType<PdfJs['getDocument']>['promise']>['getPage']>>

async function renderPage(page: PdfPageProxy, side: number, pixels: number): Promise<Uint8Array> {
  const {createCanvas} = await import('@napi-rs/canvas')
  const base = page.getViewport({scale: 1})
  const scale = Math.min(side / Math.max(base.width, base.height), Math.sqrt(pixels / (base.width * base.height)) * 0.98)
  const viewport = page.getViewport({scale})
  const canvas = createCanvas(Math.max(1, Math.round(viewport.width)), Math.max(1, Math.round(viewport.height)))
  const ctx = canvas.getContext('2d')
  ctx.fillStyle = '#ffffff'
  ctx.fillRect(0, 0, canvas.width, canvas.height)
  await page.render({canvas: canvas as unknown as HTMLCanvasElement, canvasContext: ctx as unknown as CanvasRenderingContext2D, viewport}).promise
  return new Uint8Array(await canvas.encode('png'))
}
