// POST /v1/messages and /v1/messages/count_tokens request bodies. Content blocks are checked loosely here
// (any object with a `type`) and exactly in translate.ts, so that an unsupported block gets an error that
// names it rather than a schema union mismatch.
import {Type, type Static} from 'typebox'

const Nullable = <T extends Type.TSchema>(t: T) => Type.Union([t, Type.Null()])

export const Block = Type.Object({type: Type.String()}, {additionalProperties: true})

const Message = Type.Object(
  {
    // Claude Code sends mid-conversation system messages (beta mid-conversation-system-2026-04-07).
    role: Type.Union([Type.Literal('user'), Type.Literal('assistant'), Type.Literal('system')]),
    content: Type.Union([Type.String(), Type.Array(Block)]),
  },
  {additionalProperties: true},
)

const System = Type.Union([Type.String(), Type.Array(Block)])

export const Tool = Type.Object(
  {
    name: Type.String({minLength: 1, maxLength: 128}),
    type: Type.Optional(Nullable(Type.String())),
    description: Type.Optional(Type.String()),
    input_schema: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    strict: Type.Optional(Type.Boolean()),
  },
  {additionalProperties: true},
)

const ToolChoice = Type.Object(
  {
    type: Type.Union([Type.Literal('auto'), Type.Literal('any'), Type.Literal('tool'), Type.Literal('none')]),
    name: Type.Optional(Type.String()),
    disable_parallel_tool_use: Type.Optional(Type.Boolean()),
  },
  {additionalProperties: true},
)

const Thinking = Type.Object(
  {
    type: Type.Union([Type.Literal('enabled'), Type.Literal('disabled'), Type.Literal('adaptive')]),
    budget_tokens: Type.Optional(Type.Integer({minimum: 0})),
  },
  {additionalProperties: true},
)

const common = {
  model: Type.Optional(Type.String()),
  messages: Type.Array(Message, {minItems: 1}),
  system: Type.Optional(System),
  tools: Type.Optional(Type.Array(Tool)),
  tool_choice: Type.Optional(ToolChoice),
  thinking: Type.Optional(Thinking),
}

export const MessagesBody = Type.Object(
  {
    ...common,
    max_tokens: Type.Integer({minimum: 1}),
    stream: Type.Optional(Type.Boolean()),
    stop_sequences: Type.Optional(Type.Array(Type.String(), {maxItems: 16})),
    temperature: Type.Optional(Type.Number({minimum: 0, maximum: 2})),
    top_p: Type.Optional(Type.Number({exclusiveMinimum: 0, maximum: 1})),
    top_k: Type.Optional(Type.Integer({minimum: 0})),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    output_config: Type.Optional(Nullable(Type.Object({format: Type.Optional(Nullable(Type.Object({type: Type.String()}, {additionalProperties: true})))}, {additionalProperties: true}))),
    output_format: Type.Optional(Nullable(Type.Object({type: Type.String()}, {additionalProperties: true}))),
  },
  {additionalProperties: true},
)

export const CountTokensBody = Type.Object(common, {additionalProperties: true})

export type BlockIn = Static<typeof Block> & Record<string, unknown>
export type MessageIn = Static<typeof Message>
export type ToolIn = Static<typeof Tool>
export type MessagesBody = Static<typeof MessagesBody>
export type CountTokensBody = Static<typeof CountTokensBody>
