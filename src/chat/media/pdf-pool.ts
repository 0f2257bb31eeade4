// Inline PDFs are parsed (and their text-less pages rendered) on worker threads (pdf-worker.ts through piscina), so
// a large document cannot hold up the step loop and the other clients' streams. Idle workers exit after a minute
// and never keep the process alive.
import {availableParallelism} from 'node:os'
import {Piscina} from 'piscina'
import {errors} from '../../errors.js'
import type {PdfOptions, PdfPage} from './pdf.js'
import type {PdfResult, PdfTask} from './pdf-worker.js'

let pool: Piscina | undefined

function getPool(): Piscina {
  // The worker is a .ts file when this module runs from source (tsx, tap), a .js file in dist/.
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js'
  pool ??= new Piscina({
    filename: new URL(`./pdf-worker${ext}`, import.meta.url).href,
    maxThreads: Math.max(1, Math.min(2, availableParallelism() - 1)),
    minThreads: 0,
    idleTimeout: 60_000,
  })
  return pool
}

/** readPdf (pdf.ts) on a worker thread; its refusals come back as the same 400 naming `where`. */
export async function readPdfOffThread(data: Uint8Array, where: string, options: PdfOptions): Promise<PdfPage[]> {
  const task: PdfTask = {data, where, options}
  const r = (await getPool().run(task)) as PdfResult
  if (!r.ok) throw errors.invalidRequest(r.message, where)
  return r.pages
}
