// The end of every OpenAI-style stream: the usage chunk when the client asked for it, then `data: [DONE]`; a failure
// mid-stream goes out as one error data line instead (and is logged and counted as a server error when it is one);
// the stream is always ended.
import type {SseStream} from './sse.js'
import {openaiErrorBody} from './openai-error.js'
import type {FastifyRequest} from 'fastify'
import {streamFailure} from '../../src/server/error-shapes.js'

/** Runs `chunks` (which writes the stream's chunks), then writes the tail; `usage` gives the usage chunk, if asked for. */
export async function openAiStream(
  sse: SseStream,
  request: FastifyRequest,
  chunks: () => Promise<unknown>,
  usage?: () => unknown,
): Promise<void> {
  try {
    await chunks()
    if (usage) sse.data(usage())
    sse.data('[DONE]')
  } catch (err) {
    sse.data(openaiErrorBody(streamFailure(request, err)))
  } finally {
    sse.end()
  }
}
