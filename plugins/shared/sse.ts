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

export class SseStream {
  private ended = false

  constructor(private readonly reply: FastifyReply) {}

  static open(request: FastifyRequest, reply: FastifyReply): SseStream {
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
    return new SseStream(reply)
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
    if (!this.reply.raw.writableEnded) this.reply.raw.end()
  }

  private write(chunk: string): void {
    if (this.closed) return
    this.reply.raw.write(chunk)
  }
}
