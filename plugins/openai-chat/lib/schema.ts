// POST /v1/chat/completions request body: OpenAI's fields plus the sampling extensions llama.cpp and
// vLLM accept (top_k, min_p, repetition_penalty, chat_template_kwargs, return_token_ids).
import {Type, type Static} from 'typebox'

const Nullable = <T extends Type.TSchema>(t: T) => Type.Union([t, Type.Null()])

const TextPart = Type.Object({type: Type.Literal('text'), text: Type.String()}, {additionalProperties: true})
const ImagePart = Type.Object(
  {type: Type.Literal('image_url'), image_url: Type.Object({url: Type.String(), detail: Type.Optional(Type.String())}, {additionalProperties: true})},
  {additionalProperties: true},
)
const FilePart = Type.Object(
  {
    type: Type.Literal('file'),
    file: Type.Object(
      {file_data: Type.Optional(Type.String()), filename: Type.Optional(Type.String()), file_id: Type.Optional(Type.String())},
      {additionalProperties: true},
    ),
  },
  {additionalProperties: true},
)
const InputAudioPart = Type.Object({type: Type.Literal('input_audio')}, {additionalProperties: true})
const RefusalPart = Type.Object({type: Type.Literal('refusal'), refusal: Type.String()}, {additionalProperties: true})
export const ContentPart = Type.Union([TextPart, ImagePart, FilePart, InputAudioPart, RefusalPart])

const Content = Nullable(Type.Union([Type.String(), Type.Array(ContentPart)]))

const ToolCall = Type.Object(
  {
    id: Type.Optional(Type.String()),
    type: Type.Optional(Type.Literal('function')),
    function: Type.Object({name: Type.String(), arguments: Type.Union([Type.String(), Type.Record(Type.String(), Type.Unknown())])}, {additionalProperties: true}),
  },
  {additionalProperties: true},
)

export const Message = Type.Union([
  Type.Object({role: Type.Union([Type.Literal('system'), Type.Literal('developer')]), content: Content, name: Type.Optional(Type.String())}, {additionalProperties: true}),
  Type.Object({role: Type.Literal('user'), content: Content, name: Type.Optional(Type.String())}, {additionalProperties: true}),
  Type.Object(
    {
      role: Type.Literal('assistant'),
      content: Type.Optional(Content),
      reasoning_content: Type.Optional(Nullable(Type.String())),
      reasoning: Type.Optional(Nullable(Type.String())),
      tool_calls: Type.Optional(Nullable(Type.Array(ToolCall))),
      name: Type.Optional(Type.String()),
    },
    {additionalProperties: true},
  ),
  Type.Object({role: Type.Literal('tool'), content: Content, tool_call_id: Type.Optional(Type.String()), name: Type.Optional(Type.String())}, {additionalProperties: true}),
])

export const Tool = Type.Object(
  {
    type: Type.String(),
    function: Type.Optional(
      Type.Object(
        {
          name: Type.String({minLength: 1, maxLength: 128}),
          description: Type.Optional(Type.String()),
          parameters: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
          strict: Type.Optional(Nullable(Type.Boolean())),
        },
        {additionalProperties: true},
      ),
    ),
  },
  {additionalProperties: true},
)

const ToolChoice = Type.Union([
  Type.Literal('none'),
  Type.Literal('auto'),
  Type.Literal('required'),
  Type.Object({type: Type.Literal('function'), function: Type.Object({name: Type.String()})}, {additionalProperties: true}),
])

const ResponseFormat = Type.Union([
  Type.Object({type: Type.Literal('text')}),
  Type.Object({type: Type.Literal('json_object')}),
  Type.Object(
    {
      type: Type.Literal('json_schema'),
      json_schema: Type.Object({name: Type.Optional(Type.String()), schema: Type.Optional(Type.Record(Type.String(), Type.Unknown())), strict: Type.Optional(Nullable(Type.Boolean()))}, {additionalProperties: true}),
    },
    {additionalProperties: true},
  ),
])

export const ChatBody = Type.Object(
  {
    model: Type.Optional(Type.String()),
    messages: Type.Array(Message, {minItems: 1}),
    tools: Type.Optional(Nullable(Type.Array(Tool))),
    tool_choice: Type.Optional(Nullable(ToolChoice)),
    parallel_tool_calls: Type.Optional(Nullable(Type.Boolean())),
    response_format: Type.Optional(Nullable(ResponseFormat)),
    reasoning_effort: Type.Optional(Nullable(Type.String())),
    reasoning: Type.Optional(Nullable(Type.Object({effort: Type.Optional(Type.String())}, {additionalProperties: true}))),
    chat_template_kwargs: Type.Optional(Nullable(Type.Record(Type.String(), Type.Unknown()))),
    max_tokens: Type.Optional(Nullable(Type.Integer({minimum: 0}))),
    max_completion_tokens: Type.Optional(Nullable(Type.Integer({minimum: 0}))),
    temperature: Type.Optional(Nullable(Type.Number({minimum: 0, maximum: 2}))),
    top_p: Type.Optional(Nullable(Type.Number({exclusiveMinimum: 0, maximum: 1}))),
    top_k: Type.Optional(Nullable(Type.Integer({minimum: -1}))),
    min_p: Type.Optional(Nullable(Type.Number({minimum: 0, maximum: 1}))),
    presence_penalty: Type.Optional(Nullable(Type.Number({minimum: -2, maximum: 2}))),
    frequency_penalty: Type.Optional(Nullable(Type.Number({minimum: -2, maximum: 2}))),
    repetition_penalty: Type.Optional(Nullable(Type.Number({exclusiveMinimum: 0, maximum: 10}))),
    seed: Type.Optional(Nullable(Type.Integer())),
    logit_bias: Type.Optional(Nullable(Type.Record(Type.String(), Type.Unknown()))),
    n: Type.Optional(Nullable(Type.Integer({minimum: 1, maximum: 16}))),
    stop: Type.Optional(Nullable(Type.Union([Type.String(), Type.Array(Type.String(), {maxItems: 16})]))),
    logprobs: Type.Optional(Nullable(Type.Boolean())),
    top_logprobs: Type.Optional(Nullable(Type.Integer({minimum: 0, maximum: 20}))),
    stream: Type.Optional(Nullable(Type.Boolean())),
    stream_options: Type.Optional(Nullable(Type.Object({include_usage: Type.Optional(Type.Boolean())}, {additionalProperties: true}))),
    return_token_ids: Type.Optional(Nullable(Type.Boolean())),
    /** vLLM's extension: keep generating past end-of-turn tokens (benchmarks, tests). */
    ignore_eos: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    user: Type.Optional(Type.String()),
    metadata: Type.Optional(Nullable(Type.Record(Type.String(), Type.Unknown()))),
    store: Type.Optional(Nullable(Type.Boolean())),
  },
  {additionalProperties: true},
)

export type ChatBody = Static<typeof ChatBody>
export type ChatMessageIn = Static<typeof Message>
export type ToolIn = Static<typeof Tool>
