// The prompt a ChatRequest renders to, decided exactly as generateChat() decides it (tools dropped for
// tool_choice none, thinking off when a tool call is forced), for endpoints that count or show the
// prompt without running it (Anthropic count_tokens).
import type {ChatFamily, ChatRequest} from '../../src/chat/chat.js'
import {MEDIA_DEFAULTS, resolveMedia} from '../../src/chat/media/media.js'

export async function renderPrompt(
  chat: ChatFamily,
  req: Pick<ChatRequest, 'messages' | 'tools' | 'toolChoice' | 'effort' | 'enableThinking' | 'media'>,
): Promise<{text: string; tokens: number[]}> {
  const choice = req.toolChoice ?? 'auto'
  const tools = choice === 'none' ? undefined : req.tools && req.tools.length > 0 ? req.tools : undefined
  const forcedTool = choice === 'required' || typeof choice === 'object'
  const plan = chat.thinking(req.effort)
  const enableThinking = forcedTool ? false : (req.enableThinking ?? plan.enableThinking)
  // images and documents count as generation would run them: PDFs as their page text, each image as its pad span
  const resolved = await resolveMedia(req.messages, chat.vision, req.media ?? MEDIA_DEFAULTS)
  const out = await chat.render(resolved.messages, {tools, enableThinking})
  if (resolved.images.length === 0) return out
  return {text: out.text, tokens: chat.vision!.layout(out.tokens, resolved.images).tokens}
}
