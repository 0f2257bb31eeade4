// POST /v1/completions request body (OpenAI legacy completions, plus vLLM's return_token_ids and the
// sampling fields llama.cpp and vLLM accept).
import {Type, type Static} from 'typebox'

const TokenIds = Type.Array(Type.Integer({minimum: 0}), {minItems: 1})

export const CompletionBody = Type.Object(
  {
    model: Type.Optional(Type.String()),
    prompt: Type.Union([Type.String(), Type.Array(Type.String(), {minItems: 1}), TokenIds, Type.Array(TokenIds, {minItems: 1})]),
    max_tokens: Type.Optional(Type.Union([Type.Integer({minimum: 0}), Type.Null()])),
    temperature: Type.Optional(Type.Union([Type.Number({minimum: 0, maximum: 2}), Type.Null()])),
    top_p: Type.Optional(Type.Union([Type.Number({exclusiveMinimum: 0, maximum: 1}), Type.Null()])),
    top_k: Type.Optional(Type.Union([Type.Integer({minimum: -1}), Type.Null()])),
    min_p: Type.Optional(Type.Union([Type.Number({minimum: 0, maximum: 1}), Type.Null()])),
    presence_penalty: Type.Optional(Type.Union([Type.Number({minimum: -2, maximum: 2}), Type.Null()])),
    frequency_penalty: Type.Optional(Type.Union([Type.Number({minimum: -2, maximum: 2}), Type.Null()])),
    repetition_penalty: Type.Optional(Type.Union([Type.Number({exclusiveMinimum: 0, maximum: 10}), Type.Null()])),
    seed: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
    logit_bias: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
    n: Type.Optional(Type.Union([Type.Integer({minimum: 1, maximum: 16}), Type.Null()])),
    stop: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String(), {maxItems: 16}), Type.Null()])),
    echo: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    logprobs: Type.Optional(Type.Union([Type.Integer({minimum: 0, maximum: 20}), Type.Null()])),
    stream: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    stream_options: Type.Optional(Type.Union([Type.Object({include_usage: Type.Optional(Type.Boolean())}), Type.Null()])),
    return_token_ids: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    /** vLLM's extension: keep generating past end-of-turn tokens (benchmarks, tests). */
    ignore_eos: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    user: Type.Optional(Type.String()),
    suffix: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    best_of: Type.Optional(Type.Union([Type.Integer({minimum: 1}), Type.Null()])),
  },
  {additionalProperties: true},
)

export type CompletionBody = Static<typeof CompletionBody>
