// The Qwen family's entry point: loads a package's tokenizer and template and hands the core its text
// codec and chat behaviour (src/chat/family.ts). Sibling families (qwen3_5_moe, qwen3_next, qwen3)
// re-export this module.
import type {Manifest} from '../../src/package/manifest.js'
import type {ModelFamily, TextCodec} from '../../src/chat/family.js'
import type {ChatFamily, ChatMessage, ChatTool} from '../../src/chat/chat.js'
import {join} from 'node:path'
import {Grammars} from '../../src/grammar/compiler.js'
import {loadTextModule} from './family.js'
import {QwenImages} from './images.js'
import {toolCallGrammar} from './tool-grammar.js'
import type {ToolDefinition, ChatMessage as TemplateMessage} from './template.js'

export async function load(dir: string, manifest: Manifest): Promise<ModelFamily> {
  const text = await loadTextModule(dir, manifest)
  const {tokenizer} = text
  const stopTokenIds = text.family.stopTokenIds
  const codec: TextCodec = {
    encode: s => tokenizer.encode(s),
    decode: ids => tokenizer.decode(ids),
    streamDecoder: () => tokenizer.detokenizer({skipIds: stopTokenIds}),
    tokenText: id => tokenizer.decode([id]),
  }
  const turnStart = text.tokenizer.addedToken('<|im_start|>')?.id
  const chat: ChatFamily = {
    efforts: text.family.efforts,
    thinking: effort => text.family.thinking(effort),
    async render(messages: ChatMessage[], options) {
      const prompt = text.template.render(messages as TemplateMessage[], {
        tools: options.tools as ToolDefinition[] | undefined,
        enableThinking: options.enableThinking,
        addGenerationPrompt: options.addGenerationPrompt ?? true,
      })
      const tokens = await text.prompts.encodeAsync(prompt)
      return {text: prompt, tokens, cacheAnchors: turnStarts(tokens, turnStart)}
    },
    outputParser: (prompt, options) => text.outputParser(prompt, {tools: options.tools as ToolDefinition[] | undefined, stop: options.stop, maxToolCalls: options.maxToolCalls}),
    toolCallOpener: (name?: string) => {
      if (text.family.toolFormat === 'xml') return name ? `<tool_call>\n<function=${name}>\n` : '<tool_call>\n<function='
      return name ? `<tool_call>\n{"name": ${JSON.stringify(name)}, "arguments": ` : '<tool_call>\n{"name": "'
    },
    thinkCloseIds: text.thinkCloseIds,
    vision: manifest.vision ? new QwenImages(manifest.vision) : undefined,
    grammars: new Grammars({tokenizerPath: join(dir, manifest.tokenizer.file), vocabSize: manifest.config.vocab_size, stopTokenIds}),
    toolCallGrammar: (tools, mode) => toolCallGrammar(text.family.toolFormat, tools, mode),
  }
  const close = async () => {
    await Promise.all([text.close(), chat.vision?.close()])
  }
  return {name: manifest.family, codec, stopTokenIds, chat, close}
}

/**
 * Prefix-cache anchors: where the last two turns start. The next request of a conversation repeats the
 * prompt at least up to the start of the turn being generated, whatever the template then does with it.
 */
function turnStarts(tokens: number[], id: number | undefined): number[] {
  if (id === undefined) return []
  const out: number[] = []
  for (let i = tokens.length - 1; i > 0 && out.length < 2; i--) if (tokens[i] === id) out.push(i)
  return out
}

export type {ChatTool}
