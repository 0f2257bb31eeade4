// Bodies of /tokenize, /detokenize and /apply-template (llama.cpp and vLLM accept these names).
import {Type} from 'typebox'
import {Message, Tool} from '../../openai-chat/lib/schema.js'

export const TokenizeBody = Type.Object(
  {
    model: Type.Optional(Type.String()),
    prompt: Type.Optional(Type.String()),
    content: Type.Optional(Type.String()),
    messages: Type.Optional(Type.Array(Message, {minItems: 1})),
    tools: Type.Optional(Type.Array(Tool)),
    reasoning_effort: Type.Optional(Type.String()),
    add_generation_prompt: Type.Optional(Type.Boolean()),
    with_pieces: Type.Optional(Type.Boolean()),
  },
  {additionalProperties: true},
)

export const DetokenizeBody = Type.Object(
  {model: Type.Optional(Type.String()), tokens: Type.Array(Type.Integer({minimum: 0}))},
  {additionalProperties: true},
)

export const ApplyTemplateBody = Type.Object(
  {
    model: Type.Optional(Type.String()),
    messages: Type.Array(Message, {minItems: 1}),
    tools: Type.Optional(Type.Array(Tool)),
    reasoning_effort: Type.Optional(Type.String()),
    add_generation_prompt: Type.Optional(Type.Boolean()),
  },
  {additionalProperties: true},
)

import type {Static} from 'typebox'
export type ApplyTemplateBody = Static<typeof ApplyTemplateBody>
