// The chat page's files: a fixed table, built once at startup, from webui/ and from the two vendored
// libraries in node_modules (marked, highlight.js). A request path is looked up in the table and never
// joined onto a directory, so nothing outside the table can be reached.
import {createRequire} from 'node:module'
import {createHash} from 'node:crypto'
import {existsSync, readdirSync, readFileSync, statSync} from 'node:fs'
import {fileURLToPath} from 'node:url'
import path from 'node:path'

export interface Asset {
  /** URL path, e.g. "/assets/app.css". */
  url: string
  contentType: string
  body: Buffer
  etag: string
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
}

/** highlight.js languages served to the page (ESM builds from highlight.js/es/languages). */
export const HIGHLIGHT_LANGUAGES = [
  'bash', 'c', 'cpp', 'csharp', 'css', 'diff', 'go', 'java', 'javascript', 'json', 'kotlin', 'lua', 'makefile',
  'markdown', 'php', 'plaintext', 'python', 'ruby', 'rust', 'shell', 'sql', 'swift', 'typescript', 'xml', 'yaml',
]

export function contentTypeOf(file: string): string | undefined {
  return TYPES[path.extname(file).toLowerCase()]
}

/** The folder that holds webui/index.html: the project root, from plugins/webui (sources) or dist/plugins/webui (build). */
export function findWebuiDir(from = path.dirname(fileURLToPath(import.meta.url))): string {
  let dir = from
  for (let i = 0; i < 5; i++) {
    const candidate = path.join(dir, 'webui')
    if (existsSync(path.join(candidate, 'index.html'))) return candidate
    dir = path.dirname(dir)
  }
  throw new Error(`webui/index.html not found above ${from}`)
}

function asset(url: string, body: Buffer, contentType: string): Asset {
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`
  return {url, contentType, body, etag}
}

function listFiles(dir: string, prefix = ''): string[] {
  const out: string[] = []
  for (const entry of readdirSync(dir, {withFileTypes: true})) {
    if (entry.name.startsWith('.')) continue
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name
    if (entry.isDirectory()) out.push(...listFiles(path.join(dir, entry.name), rel))
    else if (entry.isFile()) out.push(rel)
  }
  return out
}

/** highlight.js ships its core as CommonJS only (es/core.js re-exports lib/core.js); wrap it as a module. */
export function commonJsAsModule(source: string): string {
  return `const module = {exports: {}};\nconst exports = module.exports;\n${source}\nexport default module.exports;\n`
}

export function vendorAssets(): Asset[] {
  const require = createRequire(import.meta.url)
  const js = TYPES['.js']
  const css = TYPES['.css']
  const marked = readFileSync(require.resolve('marked'))
  const hljsRoot = path.dirname(require.resolve('highlight.js/package.json'))
  const core = readFileSync(require.resolve('highlight.js/lib/core'), 'utf8')
  const out = [
    asset('/assets/vendor/marked.js', marked, js),
    asset('/assets/vendor/highlight.js', Buffer.from(commonJsAsModule(core)), js),
    asset('/assets/vendor/highlight-light.css', readFileSync(path.join(hljsRoot, 'styles', 'github.css')), css),
    asset('/assets/vendor/highlight-dark.css', readFileSync(path.join(hljsRoot, 'styles', 'github-dark.css')), css),
  ]
  for (const lang of HIGHLIGHT_LANGUAGES) {
    out.push(asset(`/assets/vendor/highlight/${lang}.js`, readFileSync(path.join(hljsRoot, 'es', 'languages', `${lang}.js`)), js))
  }
  return out
}

/** Every servable file, keyed by URL path: "/" is webui/index.html; webui/<f> is /assets/<f>. */
export function buildAssetTable(webuiDir = findWebuiDir()): Map<string, Asset> {
  const table = new Map<string, Asset>()
  for (const rel of listFiles(webuiDir)) {
    const type = contentTypeOf(rel)
    if (!type) continue
    const file = path.join(webuiDir, rel)
    if (!statSync(file).isFile()) continue
    const body = readFileSync(file)
    if (rel === 'index.html') table.set('/', asset('/', body, type))
    else table.set(`/assets/${rel}`, asset(`/assets/${rel}`, body, type))
  }
  for (const a of vendorAssets()) table.set(a.url, a)
  return table
}

/** The Content-Security-Policy of the page: its own files only, images also from data:/blob: URLs. */
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "font-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ')

/** Whether an If-None-Match header names this asset's ETag. */
export function notModified(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false
  return ifNoneMatch.split(',').some(t => {
    const v = t.trim().replace(/^W\//, '')
    return v === etag || v === '*'
  })
}
