// Markdown to safe DOM: marked renders, with raw HTML from the model shown as text, links limited to
// http(s)/mailto, and images shown as links (nothing is fetched from elsewhere); the result then passes an
// allowlist sanitiser before it reaches the page, and code blocks get highlighting and a copy button.
import {Marked} from '../vendor/marked.js'
import hljs from '../vendor/highlight.js'
import bash from '../vendor/highlight/bash.js'
import c from '../vendor/highlight/c.js'
import cpp from '../vendor/highlight/cpp.js'
import csharp from '../vendor/highlight/csharp.js'
import css from '../vendor/highlight/css.js'
import diff from '../vendor/highlight/diff.js'
import go from '../vendor/highlight/go.js'
import java from '../vendor/highlight/java.js'
import javascript from '../vendor/highlight/javascript.js'
import json from '../vendor/highlight/json.js'
import kotlin from '../vendor/highlight/kotlin.js'
import lua from '../vendor/highlight/lua.js'
import makefile from '../vendor/highlight/makefile.js'
import markdown from '../vendor/highlight/markdown.js'
import php from '../vendor/highlight/php.js'
import plaintext from '../vendor/highlight/plaintext.js'
import python from '../vendor/highlight/python.js'
import ruby from '../vendor/highlight/ruby.js'
import rust from '../vendor/highlight/rust.js'
import shell from '../vendor/highlight/shell.js'
import sql from '../vendor/highlight/sql.js'
import swift from '../vendor/highlight/swift.js'
import typescript from '../vendor/highlight/typescript.js'
import xml from '../vendor/highlight/xml.js'
import yaml from '../vendor/highlight/yaml.js'

const languages = {
  bash, c, cpp, csharp, css, diff, go, java, javascript, json, kotlin, lua, makefile, markdown, php, plaintext,
  python, ruby, rust, shell, sql, swift, typescript, xml, yaml,
}
for (const [name, lang] of Object.entries(languages)) hljs.registerLanguage(name, lang)

export function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, ch => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'})[ch])
}

/** Only http(s), mailto and in-page anchors survive as link targets. */
export function safeHref(href) {
  if (typeof href !== 'string') return null
  const h = href.trim()
  if (h.startsWith('#')) return h
  try {
    const u = new URL(h)
    return ['http:', 'https:', 'mailto:'].includes(u.protocol) ? u.href : null
  } catch {
    return null
  }
}

function highlight(code, lang) {
  const name = (lang || '').trim().split(/\s+/)[0].toLowerCase()
  try {
    if (name && hljs.getLanguage(name)) return {html: hljs.highlight(code, {language: name, ignoreIllegals: true}).value, lang: name}
    if (!name && code.length < 20000) {
      const auto = hljs.highlightAuto(code)
      if (auto.language && auto.relevance >= 5) return {html: auto.value, lang: auto.language}
    }
  } catch {
    // fall through to plain text
  }
  return {html: escapeHtml(code), lang: name}
}

const marked = new Marked({gfm: true, breaks: true})
marked.use({
  renderer: {
    html({text}) {
      return escapeHtml(text)
    },
    code({text, lang}) {
      const {html, lang: used} = highlight(text, lang)
      const cls = used ? ` language-${escapeHtml(used.replace(/[^\w+#-]/g, ''))}` : ''
      return `<pre><code class="hljs${cls}">${html}</code></pre>\n`
    },
    link({href, title, tokens}) {
      const inner = this.parser.parseInline(tokens)
      const safe = safeHref(href)
      if (!safe) return inner
      const t = title ? ` title="${escapeHtml(title)}"` : ''
      return `<a href="${escapeHtml(safe)}"${t}>${inner}</a>`
    },
    image({href, text}) {
      const safe = safeHref(href)
      const label = escapeHtml(text || 'image')
      return safe ? `<a href="${escapeHtml(safe)}">[${label}]</a>` : `[${label}]`
    },
  },
})

const ALLOWED = new Set([
  'A', 'B', 'BLOCKQUOTE', 'BR', 'CODE', 'DEL', 'EM', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'HR', 'I', 'INPUT', 'LI', 'OL',
  'P', 'PRE', 'S', 'SPAN', 'STRONG', 'SUB', 'SUP', 'TABLE', 'TBODY', 'TD', 'TH', 'THEAD', 'TR', 'UL',
])
const ATTRS = {
  A: ['href', 'title'],
  CODE: ['class'],
  SPAN: ['class'],
  OL: ['start'],
  TD: ['align'],
  TH: ['align'],
  INPUT: ['type', 'checked', 'disabled'],
}

/** Keeps only allowlisted elements and attributes; anything else is replaced by its text. */
export function sanitize(fragment) {
  const walk = parent => {
    for (const node of Array.from(parent.childNodes)) {
      if (node.nodeType === Node.TEXT_NODE) continue
      if (node.nodeType !== Node.ELEMENT_NODE) {
        node.remove()
        continue
      }
      const el = node
      if (!ALLOWED.has(el.tagName) || (el.tagName === 'INPUT' && el.getAttribute('type') !== 'checkbox')) {
        el.replaceWith(document.createTextNode(el.textContent ?? ''))
        continue
      }
      const keep = ATTRS[el.tagName] ?? []
      for (const attr of Array.from(el.attributes)) if (!keep.includes(attr.name)) el.removeAttribute(attr.name)
      if (el.tagName === 'A') {
        const href = safeHref(el.getAttribute('href'))
        if (href) {
          el.setAttribute('href', href)
          if (!href.startsWith('#')) {
            el.setAttribute('target', '_blank')
            el.setAttribute('rel', 'noopener noreferrer')
          }
        } else el.removeAttribute('href')
      }
      if (el.tagName === 'INPUT') el.setAttribute('disabled', '')
      walk(el)
    }
  }
  walk(fragment)
  return fragment
}

/** Renders Markdown into `target`, replacing its content. Code blocks get a copy button. */
export function renderMarkdown(target, text) {
  const template = document.createElement('template')
  template.innerHTML = marked.parse(text ?? '', {async: false})
  const fragment = sanitize(template.content)
  for (const pre of Array.from(fragment.querySelectorAll('pre'))) {
    const wrap = document.createElement('div')
    wrap.className = 'code-block'
    const bar = document.createElement('div')
    bar.className = 'code-bar'
    const code = pre.querySelector('code')
    const lang = /language-([\w+#-]+)/.exec(code?.className ?? '')?.[1] ?? ''
    const label = document.createElement('span')
    label.className = 'code-lang'
    label.textContent = lang
    const copy = document.createElement('button')
    copy.type = 'button'
    copy.className = 'btn btn-small copy-code'
    copy.textContent = 'Copy'
    copy.setAttribute('aria-label', lang ? `Copy ${lang} code` : 'Copy code')
    bar.append(label, copy)
    pre.replaceWith(wrap)
    wrap.append(bar, pre)
  }
  target.replaceChildren(fragment)
}

/** Copies text to the clipboard; falls back to a hidden textarea where the Clipboard API is unavailable. */
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text)
      return true
    }
  } catch {
    // fall back
  }
  const ta = document.createElement('textarea')
  ta.value = text
  ta.setAttribute('readonly', '')
  ta.className = 'offscreen'
  document.body.append(ta)
  ta.select()
  let ok = false
  try {
    ok = document.execCommand('copy')
  } catch {
    ok = false
  }
  ta.remove()
  return ok
}
