// Images and PDFs chosen with the file picker, dropped on the page or pasted: read into data URLs and
// sent as OpenAI content parts.

export const MAX_FILE_BYTES = 20 * 1024 * 1024

export function kindOf(file) {
  if (file.type.startsWith('image/')) return 'image'
  if (file.type === 'application/pdf' || /\.pdf$/i.test(file.name)) return 'pdf'
  return null
}

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader()
    reader.onload = () => resolve(String(reader.result))
    reader.onerror = () => reject(reader.error ?? new Error('could not read the file'))
    reader.readAsDataURL(file)
  })
}

/** Reads the files that can be attached; returns {attachments, rejected: [reason]}. */
export async function readAttachments(files) {
  const attachments = []
  const rejected = []
  for (const file of files) {
    const kind = kindOf(file)
    if (!kind) {
      rejected.push(`${file.name || 'file'}: only images and PDFs can be attached`)
      continue
    }
    if (file.size > MAX_FILE_BYTES) {
      rejected.push(`${file.name}: larger than ${MAX_FILE_BYTES / 1024 / 1024} MB`)
      continue
    }
    let dataUrl = await readAsDataUrl(file)
    if (kind === 'pdf') dataUrl = dataUrl.replace(/^data:[^;,]*/, 'data:application/pdf')
    const name = file.name || (kind === 'image' ? `pasted-image.${(file.type.split('/')[1] || 'png').replace(/\W/g, '')}` : 'document.pdf')
    attachments.push({kind, name, mime: kind === 'pdf' ? 'application/pdf' : file.type, size: file.size, dataUrl})
  }
  return {attachments, rejected}
}

/** The OpenAI `content` of a user message: a plain string, or text and file parts. */
export function userContent(text, attachments = []) {
  const usable = attachments.filter(a => a.dataUrl)
  if (usable.length === 0) return text
  const parts = []
  if (text) parts.push({type: 'text', text})
  for (const a of usable) {
    if (a.kind === 'image') parts.push({type: 'image_url', image_url: {url: a.dataUrl}})
    else parts.push({type: 'file', file: {filename: a.name, file_data: a.dataUrl}})
  }
  return parts
}

export function formatBytes(n) {
  if (!Number.isFinite(n)) return ''
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(0)} KB`
  return `${(n / 1024 / 1024).toFixed(1)} MB`
}
