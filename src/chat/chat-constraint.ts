// What a chat request's output is constrained to, decided once per request: a forced tool call (its
// arguments following the tool's schema), the response format (a JSON Schema or any JSON object), or
// free text in which strict tools (and freeform tools with an input grammar) can only be called with
// valid arguments. Constrained answers are
// generated with thinking off (see docs/structured-output.md); strict tools under
// tool_choice auto keep thinking, since the grammar leaves text outside calls free.
import type {GrammarSpec, Grammars, ToolGrammarTool} from '../grammar/compiler.js'
import type {ChatFamily} from './family.js'
import type {ChatRequest, ChatTool, ResponseFormat, ToolChoice} from './types.js'
import {errors} from '../errors.js'
import {MAX_SUBSCHEMAS, subschemaCount} from '../grammar/schema-policy.js'

export interface ConstraintPlan {
  spec: GrammarSpec
  /** The answer starts right away (thinking off). */
  answerOnly: boolean
}

export function planConstraint(family: ChatFamily, req: ChatRequest, tools: ChatTool[] | undefined, choice: ToolChoice): ConstraintPlan | undefined {
  const forced = choice === 'required' || typeof choice === 'object'
  const wantsStrict = !forced && !req.responseFormat && (tools ?? []).some(t => t.function.strict === true || t.inputGrammar !== undefined)
  if (!forced && !req.responseFormat && !wantsStrict) return undefined
  const grammars = family.grammars
  if (!grammars || !family.toolCallGrammar) throw errors.invalidRequest('Structured output is not available for this model family', req.responseFormat ? 'response_format' : 'tools')
  if (forced) {
    const chosen = typeof choice === 'object' ? tools!.filter(t => t.function.name === choice.name) : tools!
    const schemas = withinBudget(chosen.map(t => grammarTool(grammars, t, true)))
    const stopAfterFirst = typeof choice === 'object' || req.parallelToolCalls === false
    return {spec: {type: 'structural', format: family.toolCallGrammar(schemas, {type: 'calls', stopAfterFirst})}, answerOnly: true}
  }
  if (req.responseFormat) {
    const f = req.responseFormat
    return {spec: f.type === 'json_object' ? {type: 'json_object'} : {type: 'json_schema', schema: f.schema, param: 'response_format'}, answerOnly: true}
  }
  // strict tools are held to their schemas (a schema that cannot be enforced is a 400); the others to any object
  const schemas = withinBudget(tools!.map(t => grammarTool(grammars, t, t.function.strict === true)))
  return {spec: {type: 'structural', format: family.toolCallGrammar(schemas, {type: 'triggered'})}, answerOnly: false}
}

/** Tools compiled into one grammar: their schemas together within the budget a single schema has. */
function withinBudget(tools: ToolGrammarTool[]): ToolGrammarTool[] {
  // each tool's schema counts as one subschema of the whole, like a property
  const total = tools.reduce((n, t) => n + (t.input ? 1 : 1 + subschemaCount(t.schema)), 0)
  if (total > MAX_SUBSCHEMAS) {
    throw errors.invalidRequest(
      `The tool schemas enforced together hold ${total} subschemas (at most ${MAX_SUBSCHEMAS}); the grammar engine would take many seconds to compile them`,
      'tools',
      'unsupported_schema',
    )
  }
  return tools
}

/** A tool as its call grammar needs it: its input grammar, its checked schema (`enforce`), or any object. */
function grammarTool(grammars: Grammars, t: ChatTool, enforce: boolean): ToolGrammarTool {
  if (t.inputGrammar) return {name: t.function.name, input: grammars.checkToolInput(t.function.name, t.inputGrammar)}
  return {name: t.function.name, schema: enforce ? grammars.checkSchema(t.function.parameters ?? true, 'tools') : true}
}
