// A local Hugging Face hub: a real HTTP server on 127.0.0.1 serving folders as model repos through the routes
// @huggingface/hub 2.17 calls (node_modules/@huggingface/hub/dist: modelInfo, listFiles, pathsInfo, downloadFile,
// createRepo, uploadFiles), so tests run the library itself against it with HF_ENDPOINT pointing here:
//   GET  /api/models/:repo/revision/:rev         repo info (sha, private, gated)
//   GET  /api/models/:repo/tree/:rev             listing, paginated with a Link: rel="next" header
//   POST /api/models/:repo/paths-info/:rev       per-path info (oid, size, lfs.oid = sha256)
//   GET  /:repo/resolve/:rev/:path               small files directly; LFS files by a 302 to /lfs/:sha256, which
//                                                answers Range requests (206, Content-Range) with the sha256 ETag
//   POST /api/repos/create, /api/models/:repo/preupload/:rev, /:repo.git/info/lfs/objects/batch, PUT /lfs-upload/:oid,
//   POST /api/models/:repo/commit/:rev           (ndjson: header, file, lfsFile, deletedFile)
// Knobs for failure cases: private and gated repos (a token needed), a file served tampered (same size, one byte
// flipped) for its next N transfers, and a transfer that stalls after N bytes so the client can be killed mid-file.
import {createHash} from 'node:crypto'
import {mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {createServer, type IncomingMessage, type Server, type ServerResponse} from 'node:http'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {dirname, join, relative} from 'node:path'

export interface LocalRepo {
  dir: string
  private?: boolean
  gated?: boolean
}

export interface LocalHub {
  url: string
  repos: Map<string, LocalRepo>
  /** The token that reads private and gated repos and may write. */
  token: string
  /** Tree entries per page. */
  pageSize: number
  /** path → number of coming full transfers of that file to serve with one byte flipped. */
  tamper: Map<string, number>
  /** path → bytes after which the next transfer of that file stops sending (the connection stays open). */
  stallAfter: Map<string, number>
  /** Resolves when a stalled transfer has sent its bytes. */
  stalled(): Promise<string>
  requests: string[]
  close(): Promise<void>
}

const LFS_MIN = 1000
const gitOid = (b: Buffer) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex')
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex')

function walk(dir: string): string[] {
  const out: string[] = []
  const go = (d: string) => {
    for (const e of readdirSync(d, {withFileTypes: true})) {
      const p = join(d, e.name)
      if (e.isDirectory()) go(p)
      else out.push(relative(dir, p))
    }
  }
  go(dir)
  return out.sort()
}

function entry(dir: string, path: string) {
  const b = readFileSync(join(dir, path))
  const lfs = b.length >= LFS_MIN ? {lfs: {oid: sha256(b), size: b.length, pointerSize: 134}} : {}
  return {type: 'file', path, oid: gitOid(b), size: b.length, ...lfs}
}

const commitOf = (repo: string, dir: string) =>
  createHash('sha1').update(repo).update(walk(dir).map(p => `${p}:${entry(dir, p).oid}`).join(',')).digest('hex')

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, {'content-type': 'application/json', ...headers})
  res.end(JSON.stringify(body))
}

async function body(req: IncomingMessage): Promise<Buffer> {
  const parts: Buffer[] = []
  for await (const c of req) parts.push(c as Buffer)
  return Buffer.concat(parts)
}

export async function startLocalHub(): Promise<LocalHub> {
  const blobs = new Map<string, Buffer>()
  const pushRoot = mkdtempSync(join(tmpdir(), 'splash-local-hub-'))
  let onStall: ((path: string) => void)[] = []
  const hub: LocalHub = {
    url: '',
    repos: new Map(),
    token: 'hf_local_test_token',
    pageSize: 1000,
    tamper: new Map(),
    stallAfter: new Map(),
    stalled: () => new Promise(r => onStall.push(r)),
    requests: [],
    close: async () => undefined,
  }
  const authed = (req: IncomingMessage) => req.headers.authorization === `Bearer ${hub.token}`

  /** The repo a request names, or the error answer already sent. */
  function repoOf(req: IncomingMessage, res: ServerResponse, id: string, content: boolean): LocalRepo | undefined {
    const r = hub.repos.get(id)
    if (!r || (r.private && !authed(req))) {
      json(res, 401, {error: 'Repository not found'}, {'x-error-code': 'RepoNotFound'})
      return undefined
    }
    if (content && r.gated && !authed(req)) {
      json(res, 401, {error: `Access to model ${id} is restricted. You must have access to it and be authenticated to access it.`}, {'x-error-code': 'GatedRepo'})
      return undefined
    }
    return r
  }

  function sendFile(req: IncomingMessage, res: ServerResponse, path: string, data: Buffer, etag: string): void {
    let b = data
    const range = /^bytes=(\d+)-(\d*)$/.exec(String(req.headers.range ?? ''))
    const full = !range || range[1] === '0' && (range[2] === '' || Number(range[2]) >= data.length - 1)
    if (full && (hub.tamper.get(path) ?? 0) > 0) {
      hub.tamper.set(path, hub.tamper.get(path)! - 1)
      b = Buffer.from(data)
      b[b.length >> 1] ^= 0x5a
    }
    const start = range ? Number(range[1]) : 0
    const end = range && range[2] ? Math.min(Number(range[2]), b.length - 1) : b.length - 1
    const part = b.subarray(start, end + 1)
    const headers = {'content-type': 'application/octet-stream', 'content-length': String(part.length), etag: `"${etag}"`, 'accept-ranges': 'bytes'}
    if (range) res.writeHead(206, {...headers, 'content-range': `bytes ${start}-${end}/${b.length}`})
    else res.writeHead(200, headers)
    const stall = hub.stallAfter.get(path)
    if (stall !== undefined && part.length > stall) {
      hub.stallAfter.delete(path)
      res.write(part.subarray(0, stall), () => {
        const waiting = onStall
        onStall = []
        for (const w of waiting) w(path)
      })
      return // the rest never comes; the client is killed or the hub closed
    }
    res.end(part)
  }

  /** The routes of modelInfo, listFiles, pathsInfo and downloadFile; anything else goes to handleWrite. */
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url!, hub.url)
    const p = decodeURIComponent(url.pathname)
    hub.requests.push(`${req.method} ${p}${req.headers.range ? ` ${req.headers.range}` : ''}`)
    let m = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(p)
    if (m && req.method === 'GET') {
      const r = repoOf(req, res, m[1], false)
      if (!r) return
      return json(res, 200, {
        _id: m[1], id: m[1], sha: commitOf(m[1], r.dir), private: !!r.private, gated: r.gated ? 'manual' : false,
        lastModified: new Date(0).toISOString(), downloads: 0, likes: 0,
      })
    }
    m = /^\/api\/models\/([^/]+\/[^/]+)\/tree\/([^/]+)$/.exec(p)
    if (m && req.method === 'GET') {
      const r = repoOf(req, res, m[1], true)
      if (!r) return
      const all = walk(r.dir).map(f => entry(r.dir, f))
      const from = Number(url.searchParams.get('cursor') ?? 0)
      const page = all.slice(from, from + hub.pageSize)
      const headers: Record<string, string> = {}
      if (from + hub.pageSize < all.length) {
        const next = new URL(url)
        next.searchParams.set('cursor', String(from + hub.pageSize))
        headers.link = `<${next.href}>; rel="next"`
      }
      return json(res, 200, page, headers)
    }
    m = /^\/api\/models\/([^/]+\/[^/]+)\/paths-info\/([^/]+)$/.exec(p)
    if (m && req.method === 'POST') {
      const r = repoOf(req, res, m[1], true)
      if (!r) return
      const {paths} = JSON.parse((await body(req)).toString()) as {paths: string[]}
      const have = new Set(walk(r.dir))
      const sha = commitOf(m[1], r.dir)
      return json(res, 200, paths.filter(x => have.has(x)).map(x => ({...entry(r.dir, x), lastCommit: {id: sha, title: 'commit', date: new Date(0).toISOString()}})))
    }
    m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(p)
    if (m && req.method === 'GET') {
      const r = repoOf(req, res, m[1], true)
      if (!r) return
      if (!walk(r.dir).includes(m[3])) return json(res, 404, {error: 'Entry not found'}, {'x-error-code': 'EntryNotFound'})
      const e = entry(r.dir, m[3])
      const data = readFileSync(join(r.dir, m[3]))
      if (e.lfs) {
        blobs.set(e.lfs.oid, data)
        res.writeHead(302, {location: `${hub.url}/lfs/${e.lfs.oid}?path=${encodeURIComponent(m[3])}`, 'x-linked-etag': `"${e.lfs.oid}"`, 'x-linked-size': String(e.size)})
        return void res.end()
      }
      return sendFile(req, res, m[3], data, e.oid)
    }
    m = /^\/lfs\/([0-9a-f]{64})$/.exec(p)
    if (m && req.method === 'GET') {
      const data = blobs.get(m[1])
      if (!data) return json(res, 404, {error: 'no such object'})
      return sendFile(req, res, url.searchParams.get('path') ?? '', data, m[1])
    }
    return handleWrite(req, res, p)
  }

  /** The routes of createRepo and uploadFiles (commit). */
  async function handleWrite(req: IncomingMessage, res: ServerResponse, p: string): Promise<void> {
    let m: RegExpExecArray | null
    if (req.method !== 'GET' && !authed(req) && !p.startsWith('/lfs-upload/')) return json(res, 401, {error: 'Invalid credentials in Authorization header'})
    if (p === '/api/repos/create' && req.method === 'POST') {
      const {name, organization} = JSON.parse((await body(req)).toString()) as {name: string; organization: string}
      const id = `${organization}/${name}`
      if (hub.repos.has(id)) return json(res, 409, {error: 'You already created this model repo'})
      const dir = join(pushRoot, organization, name)
      mkdirSync(dir, {recursive: true})
      hub.repos.set(id, {dir})
      return json(res, 200, {url: `${hub.url}/${id}`})
    }
    m = /^\/api\/models\/([^/]+\/[^/]+)\/preupload\/([^/]+)$/.exec(p)
    if (m && req.method === 'POST') {
      if (!hub.repos.has(m[1])) return json(res, 404, {error: 'Repository not found'}, {'x-error-code': 'RepoNotFound'})
      const {files} = JSON.parse((await body(req)).toString()) as {files: {path: string; size: number}[]}
      return json(res, 200, {files: files.map(f => ({path: f.path, uploadMode: f.size >= LFS_MIN ? 'lfs' : 'regular', shouldIgnore: false}))})
    }
    m = /^\/([^/]+\/[^/]+)\.git\/info\/lfs\/objects\/batch$/.exec(p)
    if (m && req.method === 'POST') {
      const {objects} = JSON.parse((await body(req)).toString()) as {objects: {oid: string; size: number}[]}
      return json(res, 200, {
        transfer: 'basic',
        objects: objects.map(o => ({oid: o.oid, size: o.size, authenticated: true, ...(blobs.has(o.oid) ? {} : {actions: {upload: {href: `${hub.url}/lfs-upload/${o.oid}`}}})})),
      }, {'content-type': 'application/vnd.git-lfs+json'})
    }
    m = /^\/lfs-upload\/([0-9a-f]{64})$/.exec(p)
    if (m && req.method === 'PUT') {
      const data = await body(req)
      if (sha256(data) !== m[1]) return json(res, 400, {error: 'sha256 does not match the object id'})
      blobs.set(m[1], data)
      res.writeHead(200, {etag: `"${m[1]}"`})
      return void res.end()
    }
    m = /^\/api\/models\/([^/]+\/[^/]+)\/commit\/([^/]+)$/.exec(p)
    if (m && req.method === 'POST') {
      const r = hub.repos.get(m[1])
      if (!r) return json(res, 404, {error: 'Repository not found'}, {'x-error-code': 'RepoNotFound'})
      const lines = (await body(req)).toString().split('\n').filter(Boolean).map(l => JSON.parse(l) as {key: string; value: Record<string, string>})
      for (const {key, value} of lines) {
        const dest = value.path ? join(r.dir, value.path) : ''
        if (key === 'file' || key === 'lfsFile') mkdirSync(dirname(dest), {recursive: true})
        if (key === 'file') writeFileSync(dest, Buffer.from(value.content, 'base64'))
        else if (key === 'lfsFile') {
          const data = blobs.get(value.oid)
          if (!data) return json(res, 422, {error: `LFS object ${value.oid} was not uploaded`})
          writeFileSync(dest, data)
        } else if (key === 'deletedFile') rmSync(dest, {force: true})
      }
      const sha = commitOf(m[1], r.dir)
      return json(res, 200, {commitOid: sha, commitUrl: `${hub.url}/${m[1]}/commit/${sha}`})
    }
    json(res, 404, {error: `no route for ${req.method} ${p}`})
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(err => {
      if (!res.headersSent) json(res, 500, {error: String(err)})
      else res.destroy()
    })
  })
  await new Promise<void>(r => server.listen(0, '127.0.0.1', r))
  hub.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  hub.close = () =>
    new Promise(r => {
      server.closeAllConnections()
      server.close(() => {
        rmSync(pushRoot, {recursive: true, force: true})
        r()
      })
    })
  return hub
}
