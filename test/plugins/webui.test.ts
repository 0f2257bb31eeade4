// The chat page's plugin: what it serves, with which headers, that nothing outside its table is reachable,
// that every module the page imports resolves, that nothing is loaded from elsewhere, and --no-webui.
import t from 'tap'
import http from 'node:http'
import {mkdtemp, writeFile, readdir, readFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import {buildApp} from '../../src/server/app.js'
import {buildAssetTable, commonJsAsModule, findWebuiDir, notModified} from '../../plugins/webui/lib/assets.js'

const host = {host: 'localhost'}

t.test('GET / is the page, with its headers', async t => {
  const app = await buildApp({})
  t.teardown(() => app.close())
  const r = await app.inject({url: '/', headers: host})
  t.equal(r.statusCode, 200)
  t.equal(r.headers['content-type'], 'text/html; charset=utf-8')
  t.equal(r.headers['cache-control'], 'no-cache')
  t.equal(r.headers['x-content-type-options'], 'nosniff')
  t.match(r.headers['content-security-policy'], /script-src 'self'/)
  t.match(r.headers['content-security-policy'], /default-src 'none'/)
  t.match(r.headers.etag, /^"[\w-]+"$/)
  t.match(r.body, /<script type="module" src="assets\/js\/main\.js"><\/script>/)
  t.match(r.body, /<html lang="en">/)

  const again = await app.inject({url: '/', headers: {...host, 'if-none-match': r.headers.etag as string}})
  t.equal(again.statusCode, 304, 'revalidation by ETag')
  t.equal(again.body, '')
  const head = await app.inject({method: 'HEAD', url: '/', headers: host})
  t.equal(head.statusCode, 200)
  t.equal(head.headers['content-type'], 'text/html; charset=utf-8')
})

t.test('assets and vendored libraries have the right types', async t => {
  const app = await buildApp({})
  t.teardown(() => app.close())
  const expect: Array<[string, RegExp]> = [
    ['/assets/app.css', /^text\/css; charset=utf-8$/],
    ['/assets/js/main.js', /^text\/javascript; charset=utf-8$/],
    ['/assets/icon.svg', /^image\/svg\+xml$/],
    ['/assets/vendor/marked.js', /^text\/javascript; charset=utf-8$/],
    ['/assets/vendor/highlight.js', /^text\/javascript; charset=utf-8$/],
    ['/assets/vendor/highlight/python.js', /^text\/javascript; charset=utf-8$/],
    ['/assets/vendor/highlight-light.css', /^text\/css; charset=utf-8$/],
    ['/assets/vendor/highlight-dark.css', /^text\/css; charset=utf-8$/],
  ]
  for (const [url, type] of expect) {
    const r = await app.inject({url, headers: host})
    t.equal(r.statusCode, 200, url)
    t.match(r.headers['content-type'], type, url)
    t.equal(r.headers['cache-control'], 'no-cache', url)
    t.ok(r.headers.etag, url)
    t.notOk(r.headers['content-security-policy'], `${url}: the CSP belongs to the page`)
  }
  t.match((await app.inject({url: '/assets/vendor/marked.js', headers: host})).body, /export\s*\{/)
})

t.test('every module the page imports resolves, from index.html down', async t => {
  const app = await buildApp({})
  t.teardown(() => app.close())
  const base = 'http://localhost/'
  const index = (await app.inject({url: '/', headers: host})).body
  const queue = [...index.matchAll(/(?:src|href)="([^"]+)"/g)].map(m => new URL(m[1], base).href)
  const seen = new Set<string>()
  while (queue.length) {
    const url = queue.shift()!
    if (seen.has(url)) continue
    seen.add(url)
    const u = new URL(url)
    t.equal(u.origin, 'http://localhost', `${url} is on the page's own origin`)
    const r = await app.inject({url: u.pathname, headers: host})
    t.equal(r.statusCode, 200, u.pathname)
    if (u.pathname.endsWith('.js')) {
      for (const m of r.body.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]/gm)) queue.push(new URL(m[1], url).href)
      for (const m of r.body.matchAll(/^\s*import\s+['"]([^'"]+)['"]/gm)) queue.push(new URL(m[1], url).href)
    }
  }
  t.ok(seen.has('http://localhost/assets/vendor/marked.js'))
  t.ok(seen.has('http://localhost/assets/vendor/highlight.js'))
  t.ok(seen.size >= 10, `${seen.size} files`)
})

t.test('the page works offline: no URL to another host in webui/', async t => {
  const dir = findWebuiDir()
  const files = (await readdir(dir, {recursive: true})).filter(f => /\.(html|css|js)$/.test(f))
  t.ok(files.length >= 5)
  for (const f of files) {
    const text = await readFile(path.join(dir, f), 'utf8')
    // The SVG namespace is a name, not a request.
    const urls = [...text.matchAll(/\b(?:https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}[^\s'")]*/gi)].map(m => m[0]).filter(u => !u.startsWith('http://www.w3.org/'))
    t.same(urls, [], `${f} names no other host`)
    t.notMatch(text, /@import|fonts\.googleapis|cdn\./i, f)
  }
})

t.test('no directory traversal', async t => {
  const app = await buildApp({})
  t.teardown(() => app.close())
  await app.listen({host: '127.0.0.1', port: 0})
  const port = (app.server.address() as {port: number}).port
  const raw = (p: string) =>
    new Promise<{status: number; body: string}>((resolve, reject) => {
      // http.request sends the path as given: no client-side normalisation of dot segments.
      const req = http.request({host: '127.0.0.1', port, path: p, headers: host}, res => {
        let body = ''
        res.on('data', d => (body += d))
        res.on('end', () => resolve({status: res.statusCode ?? 0, body}))
      })
      req.on('error', reject)
      req.end()
    })
  const attempts = [
    '/assets/../package.json',
    '/assets/../../package.json',
    '/assets/%2e%2e/package.json',
    '/assets/%2E%2E%2Fpackage.json',
    '/assets/..%2f..%2fpackage.json',
    '/assets/..%5c..%5cpackage.json',
    '/assets/vendor/../../package.json',
    '/assets/vendor/highlight/../../../node_modules/marked/package.json',
    '/assets/vendor/highlight/1c.js',
    '/assets//etc/passwd',
    '/assets/%2fetc%2fpasswd',
    '/assets/....//....//package.json',
    '/assets/js/../../src/server/app.ts',
    '/assets/index.html/../../package.json',
    '/assets/app.css%00.js',
    '/..%2fpackage.json',
    '/assets/',
    '/assets',
    '/index.html',
  ]
  for (const p of attempts) {
    const r = await raw(p)
    t.not(r.status, 200, p)
    t.notMatch(r.body, /"name":\s*"(splash|marked)"|root:x:0|buildApp/, `${p} leaks nothing`)
  }
  t.equal((await raw('/assets/app.css')).status, 200, 'a real asset still loads over the socket')
})

t.test('the table holds only webui/ files and the vendored libraries', async t => {
  const table = buildAssetTable()
  for (const url of table.keys()) t.match(url, /^\/$|^\/assets\/[\w./-]+$/, url)
  t.notOk([...table.keys()].some(u => u.includes('..')))
  t.ok(table.has('/'))
  t.notOk(table.has('/assets/index.html'), 'index.html is only at /')
})

t.test('the highlight.js core, wrapped as a module, runs', async t => {
  const table = buildAssetTable()
  const dir = await mkdtemp(path.join(tmpdir(), 'splash-webui-'))
  const core = path.join(dir, 'highlight.mjs')
  const python = path.join(dir, 'python.mjs')
  await writeFile(core, table.get('/assets/vendor/highlight.js')!.body)
  await writeFile(python, table.get('/assets/vendor/highlight/python.js')!.body)
  const hljs = (await import(pathToFileURL(core).href)).default
  hljs.registerLanguage('python', (await import(pathToFileURL(python).href)).default)
  t.match(hljs.highlight('def f(): return 1', {language: 'python'}).value, /<span class="hljs-keyword">def<\/span>/)
  t.match(commonJsAsModule('module.exports = 1'), /export default module\.exports/)
})

t.test('ETag matching', async t => {
  t.ok(notModified('"a"', '"a"'))
  t.ok(notModified('W/"a"', '"a"'))
  t.ok(notModified('"b", "a"', '"a"'))
  t.ok(notModified('*', '"a"'))
  t.notOk(notModified('"b"', '"a"'))
  t.notOk(notModified(undefined, '"a"'))
})

t.test('--no-webui: no page', async t => {
  const app = await buildApp({webui: false})
  t.teardown(() => app.close())
  t.equal((await app.inject({url: '/', headers: host})).statusCode, 404)
  t.equal((await app.inject({url: '/assets/app.css', headers: host})).statusCode, 404)
})

t.test('with an API key the page loads without it, and the API still needs it', async t => {
  // Needs src/server/security.ts to let routes marked `config: {public: true}` through (see plugins/webui/index.ts).
  const app = await buildApp({apiKey: 'sk-webui'})
  t.teardown(() => app.close())
  t.equal((await app.inject({url: '/', headers: host})).statusCode, 200, 'GET /')
  t.equal((await app.inject({url: '/assets/js/main.js', headers: host})).statusCode, 200, 'GET /assets/js/main.js')
  t.equal((await app.inject({url: '/assets/nothing.js', headers: host})).statusCode, 404, 'an unknown asset is a 404, not a 401')
  t.equal((await app.inject({url: '/v1/models', headers: host})).statusCode, 401, 'the API needs the key')
  t.equal((await app.inject({url: '/v1/models', headers: {...host, authorization: 'Bearer sk-webui'}})).statusCode, 200)
  t.equal((await app.inject({url: '/', headers: {host: 'evil.example'}})).statusCode, 403, 'the Host allowlist still applies')
})
