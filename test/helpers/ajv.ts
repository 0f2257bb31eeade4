// One ajv (draft 2020-12 with ajv-formats) for checking structured output against its schema.
import Ajv2020 from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'

type Validator = {validate(schema: unknown, data: unknown): boolean; errorsText(): string}

const AjvCtor = Ajv2020 as unknown as new (o: Record<string, unknown>) => Validator
const ajv = new AjvCtor({strict: false, allErrors: true})
;(addFormats as unknown as (a: Validator) => void)(ajv)

/** Parses `text` as JSON and validates it; returns why not, or undefined when it is valid. */
export function invalidity(schema: unknown, text: string): string | undefined {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (e) {
    return `not JSON (${(e as Error).message}): ${JSON.stringify(text)}`
  }
  return ajv.validate(schema, value) ? undefined : `${ajv.errorsText()}: ${text}`
}
