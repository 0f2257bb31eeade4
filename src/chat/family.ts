// What a model family module (models/<family>/) hands the core once a package is loaded: its text
// codec, stop tokens, chat rendering and output parsing. The API plugins use it through the ModelHost;
// they never touch a tokenizer or template directly.
import type {Grammars, StructuralTagFormat, ToolGrammarTool} from '../grammar/compiler.js'
import type {VisionFamily} from './media/media.js'
import type {ChatMessage, ChatOutputEvent, ChatTool} from './types.js'

export interface StreamDecoder {
  /** Adds one token; returns the text that is now complete (never half a UTF-8 character). */
  push(token: number): string
  /** Whatever is still held back (an incomplete character at the very end). */
  flush(): string
}

export interface TextCodec {
  encode(text: string): number[]
  decode(tokens: readonly number[]): string
  streamDecoder(): StreamDecoder
  /** How one token reads on its own, for logprobs (partial UTF-8 shown as bytes:\\xNN). */
  tokenText(token: number): string
}

export interface ModelFamily {
  /** Family name as in the manifest (qwen3_5, qwen3_5_moe, qwen3_next, qwen3). */
  name: string
  codec: TextCodec
  /** End-of-turn / end-of-text ids: generation stops on them. */
  stopTokenIds: number[]
  chat: ChatFamily
  close(): Promise<void>
}

export interface ChatOutputParser {
  readonly inReasoning: boolean
  readonly done: boolean
  push(text: string): ChatOutputEvent[]
  finish(reason: 'stop' | 'length'): ChatOutputEvent[]
}

export interface ThinkingPlan {
  enableThinking: boolean | undefined
  budget: number | undefined
  effort: string | undefined
}

/** What a model family provides for chat (models/<family>/ implements it). */
export interface ChatFamily {
  /** Reasoning efforts the package offers, and the default. */
  efforts: string[]
  thinking(effort?: string): ThinkingPlan
  /** Renders the conversation with the package's template and tokenizes it (cached per turn). */
  render(
    messages: ChatMessage[],
    options: {tools?: ChatTool[]; enableThinking?: boolean; addGenerationPrompt?: boolean},
  ): Promise<{text: string; tokens: number[]; cacheAnchors?: number[]}>
  outputParser(prompt: string, options: {tools?: ChatTool[]; stop?: readonly string[]; maxToolCalls?: number}): ChatOutputParser
  /** Text that opens a tool call for `name` in this family's format (forced for tool_choice required / named). */
  toolCallOpener(name?: string): string
  /** Ids that close the think block when a thinking budget is spent. */
  thinkCloseIds: number[]
  /** Images: present when the package has a vision encoder. */
  vision?: VisionFamily
  /** Grammar compilation for this model's vocabulary (absent: structured output is refused). */
  grammars?: Grammars
  /** The family's tool-call form as a structural tag over `tools` (schemas already checked). */
  toolCallGrammar?(tools: ToolGrammarTool[], mode: {type: 'calls'; stopAfterFirst: boolean} | {type: 'triggered'}): StructuralTagFormat
}
