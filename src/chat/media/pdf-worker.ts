// Piscina task: one inline PDF → its pages (text, and PNGs of the text-less pages when asked), read with pdf.ts off
// the event loop. Failures come back as values: a thrown error would lose its type crossing the thread boundary.
import {SplashError} from '../../errors.js'
import {readPdf, type PdfOptions, type PdfPage} from './pdf.js'

export interface PdfTask {
  data: Uint8Array
  /** The part it came from (named in errors). */
  where: string
  options: PdfOptions
}

export type PdfResult = {ok: true; pages: PdfPage[]} | {ok: false; message: string}

export default async function readPdfTask(task: PdfTask): Promise<PdfResult> {
  try {
    return {ok: true, pages: await readPdf(task.data, task.where, task.options)}
  } catch (err) {
    if (err instanceof SplashError) return {ok: false, message: err.message}
    return {ok: false, message: `${task.where}: the PDF could not be read (${(err as Error).message})`}
  }
}
