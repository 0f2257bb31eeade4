// Server-sent events over a hijacked reply, plus the abort signal that fires when the client goes away.
import type {FastifyReply, FastifyRequest} from 'fastify'

/** An AbortSignal that fires when the client disconnects before the reply is finished. */
export function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController()
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) controller.abort()
  })
  return controller.signal
}

/** A stream silent this long gets a comment line, so clients and proxies with idle timeouts wait out a long prefill. */
export const KEEPALIVE_MS = 15_000

export class SseStream {
  private ended = false
  private lastWrite = Date.now()
  private readonly keepalive: NodeJS.Timeout

  constructor(
    private readonly reply: FastifyReply,
    keepaliveMs = KEEPALIVE_MS,
  ) {
    this.keepalive = setInterval(() => {
      if (this.closed) return clearInterval(this.keepalive)
      if (Date.now() - this.lastWrite >= keepaliveMs) this.comment('keep-alive')
    }, keepaliveMs / 3)
    this.keepalive.unref()
    reply.raw.on('close', () => clearInterval(this.keepalive))
  }

  static open(request: FastifyRequest, reply: FastifyReply, keepaliveMs = KEEPALIVE_MS): SseStream {
    reply.hijack()
    const headers: Record<string, string> = {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    }
    // Headers that hooks set before the hijack (request ids and the like) still go out.
    for (const [k, v] of Object.entries(reply.getHeaders())) if (typeof v === 'string') headers[k] = v
    void request
    reply.raw.writeHead(200, headers)
    return new SseStream(reply, keepaliveMs)
  }

  get closed(): boolean {
    return this.ended || this.reply.raw.destroyed || this.reply.raw.writableEnded
  }

  /** `data: <json>\n\n` (or a raw string such as [DONE]). */
  data(payload: unknown): void {
    this.write(`data: ${typeof payload === 'string' ? payload : JSON.stringify(payload)}\n\n`)
  }

  /** `event: <name>\ndata: <json>\n\n`, as Anthropic and Responses streams need. */
  event(name: string, payload: unknown): void {
    this.write(`event: ${name}\ndata: ${JSON.stringify(payload)}\n\n`)
  }

  comment(text: string): void {
    this.write(`: ${text}\n\n`)
  }

  end(): void {
    if (this.ended) return
    this.ended = true
    clearInterval(this.keepalive)
    if (!this.reply.raw.writableEnded) this.reply.raw.end()
  }

  private write(chunk: string): void {
    if (this.closed) return
    this.lastWrite = Date.now()
    this.reply.raw.write(chunk)
  }
}
