// The end of every OpenAI-style stream: the usage chunk when the client asked for it, then `data: [DONE]`; a failure
// mid-stream goes out as one error data line instead; the stream is always ended.
import type {SseStream} from './sse.js'
import {openaiErrorBody} from './openai-error.js'
import {toSplashError} from '../../src/server/error-shapes.js'

/** Runs `chunks` (which writes the stream's chunks), then writes the tail; `usage` gives the usage chunk, if asked for. */
export async function openAiStream(sse: SseStream, chunks: () => Promise<unknown>, usage?: () => unknown): Promise<void> {
  try {
    await chunks()
    if (usage) sse.data(usage())
    sse.data('[DONE]')
  } catch (err) {
    sse.data(openaiErrorBody(toSplashError(err)))
  } finally {
    sse.end()
  }
}
