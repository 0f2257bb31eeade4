// PDFs written from scratch for the media tests: Helvetica as /F1, one content stream per page, and a correct
// cross-reference table (pdfjs reads them without repairs).

/** A PDF with one page per content stream. */
export function pdfOfPages(streams: string[]): Buffer {
  const objects = ['<< /Type /Catalog /Pages 2 0 R >>', '', '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>']
  const kids: string[] = []
  for (const stream of streams) {
    kids.push(`${objects.length + 1} 0 R`)
    objects.push(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents ${objects.length + 2} 0 R /Resources << /Font << /F1 3 0 R >> >> >>`)
    objects.push(`<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`)
  }
  objects[1] = `<< /Type /Pages /Kids [${kids.join(' ')}] /Count ${streams.length} >>`
  let out = '%PDF-1.4\n'
  const offsets: number[] = []
  objects.forEach((o, i) => {
    offsets.push(out.length)
    out += `${i + 1} 0 obj\n${o}\nendobj\n`
  })
  const xref = out.length
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`
  for (const off of offsets) out += `${String(off).padStart(10, '0')} 00000 n \n`
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`
  return Buffer.from(out, 'latin1')
}

const textOp = (size: number, text: string) => `BT /F1 ${size} Tf 72 720 Td (${text.replace(/[()\\]/g, '\\$&')}) Tj ET`

/** A one-page PDF that says `text` (an empty text draws nothing: a page without a text layer). */
export function makePdf(text: string): Buffer {
  return pdfOfPages([textOp(24, text)])
}

/** A PDF of `pages` pages, each saying "Page n" and drawing `lines` strokes (what makes it slow to read). */
export function heavyPdf(pages: number, lines: number): Buffer {
  const draw = Array.from({length: lines}, (_, i) => `${i % 600} ${(i * 7) % 780} m ${(i * 3) % 600} ${(i * 11) % 780} l S`).join('\n')
  return pdfOfPages(Array.from({length: pages}, (_, p) => `${textOp(12, `Page ${p + 1}`)}\n${draw}`))
}
