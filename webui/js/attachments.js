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

/**
 * Whether the served model takes images: GET /v1/models lists its input_modalities; a server that does not say is
 * taken to accept them (it answers for itself).
 */
export function takesImages(model) {
  return !Array.isArray(model?.input_modalities) || model.input_modalities.includes('image')
}

/**
 * Reads the files that can be attached; returns {attachments, rejected: [reason]}. `images: false` (a model without
 * a vision encoder) refuses images here, so they are never sent.
 */
export async function readAttachments(files, {images = true} = {}) {
  const attachments = []
  const rejected = []
  for (const file of files) {
    const kind = kindOf(file)
    if (!kind || (kind === 'image' && !images)) {
      rejected.push(
        kind ? `${file.name || 'image'}: this model has no vision encoder, so it takes no images (PDFs are read as text)` : `${file.name || 'file'}: only ${images ? 'images and PDFs' : 'PDFs'} can be attached`,
      )
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
