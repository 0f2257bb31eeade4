// POST /v1/responses request body. Input items and tools are checked loosely here (objects) and exactly in
// translate.ts, so that an item or tool this server cannot use gets an error (or a log line) that names it.
import {Type, type Static} from 'typebox'

const Nullable = <T extends Type.TSchema>(t: T) => Type.Union([t, Type.Null()])
const Loose = Type.Object({}, {additionalProperties: true})

const ToolChoice = Type.Union([Type.Literal('none'), Type.Literal('auto'), Type.Literal('required'), Type.Object({type: Type.String()}, {additionalProperties: true})])

export const ResponsesBody = Type.Object(
  {
    model: Type.Optional(Type.String()),
    input: Type.Optional(Type.Union([Type.String(), Type.Array(Loose)])),
    instructions: Type.Optional(Nullable(Type.String())),
    tools: Type.Optional(Nullable(Type.Array(Type.Object({type: Type.String()}, {additionalProperties: true})))),
    tool_choice: Type.Optional(Nullable(ToolChoice)),
    parallel_tool_calls: Type.Optional(Nullable(Type.Boolean())),
    reasoning: Type.Optional(
      Nullable(Type.Object({effort: Type.Optional(Nullable(Type.String())), summary: Type.Optional(Nullable(Type.String()))}, {additionalProperties: true})),
    ),
    store: Type.Optional(Nullable(Type.Boolean())),
    stream: Type.Optional(Nullable(Type.Boolean())),
    include: Type.Optional(Nullable(Type.Array(Type.String()))),
    prompt_cache_key: Type.Optional(Nullable(Type.String())),
    text: Type.Optional(
      Nullable(Type.Object({format: Type.Optional(Nullable(Type.Object({type: Type.String()}, {additionalProperties: true}))), verbosity: Type.Optional(Nullable(Type.String()))}, {additionalProperties: true})),
    ),
    max_output_tokens: Type.Optional(Nullable(Type.Integer({minimum: 1}))),
    previous_response_id: Type.Optional(Nullable(Type.String())),
    temperature: Type.Optional(Nullable(Type.Number({minimum: 0, maximum: 2}))),
    top_p: Type.Optional(Nullable(Type.Number({exclusiveMinimum: 0, maximum: 1}))),
    metadata: Type.Optional(Nullable(Type.Record(Type.String(), Type.Unknown()))),
  },
  {additionalProperties: true},
)

export type ResponsesBody = Static<typeof ResponsesBody>
/** An input item or tool as received: an object with fields of any type. */
export type Item = Record<string, unknown>
