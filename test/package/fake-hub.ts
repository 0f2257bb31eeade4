// A real HTTP server on 127.0.0.1 that serves folders as hub repos through the endpoints @huggingface/hub calls
// (toolchain.md §5): revision info, paths-info, resolve with Range. Knobs: a required token, and cutting a file's
// transfer after N bytes (once) to test resume.
import {createHash} from 'node:crypto'
import {readdirSync, readFileSync, statSync} from 'node:fs'
import {createServer, type IncomingMessage, type Server, type ServerResponse} from 'node:http'
import type {AddressInfo} from 'node:net'
import {join, relative} from 'node:path'

export interface FakeHub {
  url: string
  repos: Map<string, string>
  token?: string
  /** path → bytes after which the next full transfer of that file is cut */
  cutAfter: Map<string, number>
  requests: string[]
  close(): Promise<void>
}

function files(dir: string): string[] {
  const out: string[] = []
  const walk = (d: string) => {
    for (const e of readdirSync(d, {withFileTypes: true})) {
      const p = join(d, e.name)
      if (e.isDirectory()) walk(p)
      else out.push(relative(dir, p))
    }
  }
  walk(dir)
  return out.sort()
}

const sha1 = (b: Buffer) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex')
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex')
const commitOf = (repo: string, dir: string) => createHash('sha1').update(repo + files(dir).join(',')).digest('hex')

function entry(dir: string, path: string) {
  const b = readFileSync(join(dir, path))
  const big = b.length > 1000
  return {type: 'file', path, oid: sha1(b), size: b.length, ...(big ? {lfs: {oid: sha256(b), size: b.length, pointerSize: 130}} : {})}
}

export async function startFakeHub(): Promise<FakeHub> {
  const hub: FakeHub = {url: '', repos: new Map(), cutAfter: new Map(), requests: [], close: async () => undefined}
  const server: Server = createServer((req, res) => handle(hub, req, res).catch(err => {
    res.statusCode = 500
    res.end(String(err))
  }))
  await new Promise<void>(r => server.listen(0, '127.0.0.1', r))
  hub.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  hub.close = () => new Promise(r => {
    server.closeAllConnections()
    server.close(() => r())
  })
  return hub
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, {'content-type': 'application/json', ...headers})
  res.end(JSON.stringify(body))
}

async function handle(hub: FakeHub, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url!, hub.url)
  hub.requests.push(`${req.method} ${url.pathname}${req.headers.range ? ` ${req.headers.range}` : ''}`)
  if (hub.token && req.headers.authorization !== `Bearer ${hub.token}`) {
    return json(res, 401, {error: 'Invalid credentials in Authorization header'}, {'x-error-code': 'RepoNotFound'})
  }
  let m = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(url.pathname)
  if (m) {
    const dir = hub.repos.get(m[1])
    if (!dir) return json(res, 404, {error: 'Repository not found'}, {'x-error-code': 'RepoNotFound'})
    return json(res, 200, {_id: 'x', id: m[1], sha: commitOf(m[1], dir), private: false, lastModified: new Date(0).toISOString()})
  }
  m = /^\/api\/models\/([^/]+\/[^/]+)\/paths-info\/([^/]+)$/.exec(url.pathname)
  if (m && req.method === 'POST') {
    const dir = hub.repos.get(m[1])
    if (!dir) return json(res, 404, {error: 'Repository not found'}, {'x-error-code': 'RepoNotFound'})
    let body = ''
    for await (const c of req) body += c
    const {paths} = JSON.parse(body) as {paths: string[]}
    const all = new Set(files(dir))
    return json(res, 200, paths.filter(p => all.has(p)).map(p => ({...entry(dir, p), lastCommit: {id: commitOf(m![1], dir), title: 't', date: new Date(0).toISOString()}})))
  }
  m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname)
  if (m) {
    const dir = hub.repos.get(m[1])
    if (!dir) return json(res, 404, {error: 'Repository not found'}, {'x-error-code': 'RepoNotFound'})
    const path = decodeURIComponent(m[3])
    if (!files(dir).includes(path)) return json(res, 404, {error: 'Entry not found'}, {'x-error-code': 'EntryNotFound'})
    const b = readFileSync(join(dir, path))
    const e = entry(dir, path)
    const etag = `"${e.lfs?.oid ?? e.oid}"`
    const range = /^bytes=(\d+)-(\d*)$/.exec(String(req.headers.range ?? ''))
    if (range) {
      const start = Number(range[1])
      const end = range[2] ? Math.min(Number(range[2]), b.length - 1) : b.length - 1
      res.writeHead(206, {
        'content-type': 'application/octet-stream', 'content-range': `bytes ${start}-${end}/${b.length}`,
        'content-length': String(end - start + 1), etag, 'x-linked-etag': etag,
      })
      if (end - start + 1 > 1) return cutOrSend(hub, path, res, b.subarray(start, end + 1))
      res.end(b.subarray(start, end + 1))
      return
    }
    res.writeHead(200, {'content-type': 'application/octet-stream', 'content-length': String(b.length), etag})
    return cutOrSend(hub, path, res, b)
  }
  json(res, 404, {error: 'not found'})
}

function cutOrSend(hub: FakeHub, path: string, res: ServerResponse, data: Buffer): void {
  const cut = hub.cutAfter.get(path)
  if (cut === undefined || cut >= data.length) return void res.end(data)
  hub.cutAfter.delete(path)
  res.write(data.subarray(0, cut), () => setTimeout(() => res.socket?.destroy(), 20))
}

export function statSize(p: string): number {
  return statSync(p).size
}
