// JSON Schemas the structured-output tests hold every output to. `bounded`: every string, number and
// array in it has a bounded length, so even a model with random weights reaches the end of the grammar
// within a few dozen tokens (those run end to end on the random package).
export interface SchemaCase {
  name: string
  schema: Record<string, unknown>
  bounded: boolean
}

const str = (maxLength: number, minLength = 0) => ({type: 'string', minLength, maxLength})
const int = (minimum: number, maximum: number) => ({type: 'integer', minimum, maximum})
const obj = (properties: Record<string, unknown>, required = Object.keys(properties), extra: Record<string, unknown> = {}) => ({
  type: 'object',
  properties,
  required,
  additionalProperties: false,
  ...extra,
})

export const SCHEMAS: SchemaCase[] = [
  // scalars
  {name: 'boolean', schema: {type: 'boolean'}, bounded: true},
  {name: 'null', schema: {type: 'null'}, bounded: true},
  {name: 'integer range', schema: int(-5, 5), bounded: true},
  {name: 'integer exclusive range', schema: {type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 10}, bounded: true},
  {name: 'integer lower bound only', schema: {type: 'integer', minimum: 7, maximum: 99}, bounded: true},
  {name: 'number in [0, 1]', schema: {type: 'number', minimum: 0, maximum: 1}, bounded: true},
  {name: 'number, exclusive bounds', schema: {type: 'number', exclusiveMinimum: -2.5, exclusiveMaximum: 7.25}, bounded: true},
  {name: 'nullable number range', schema: obj({score: {type: ['number', 'null'], minimum: 0.5, maximum: 99.75}}), bounded: true},
  {name: 'integer negative range', schema: int(-1000, -990), bounded: true},
  {name: 'string enum', schema: {type: 'string', enum: ['red', 'green', 'blue']}, bounded: true},
  {name: 'mixed enum', schema: {enum: ['a', 1, null, true, 2.5]}, bounded: true},
  {name: 'const object', schema: {const: {k: [1, 'x'], ok: true}}, bounded: true},
  {name: 'bounded string', schema: str(6, 1), bounded: true},
  {name: 'exact length string', schema: str(3, 3), bounded: true},
  {name: 'bounded any characters', schema: {type: 'string', pattern: '^.{1,4}$'}, bounded: true},
  {name: 'long bounded string', schema: str(140, 2), bounded: false},
  {name: 'pattern code', schema: {type: 'string', pattern: '^[A-Z]{3}-[0-9]{2,4}$'}, bounded: true},
  {name: 'pattern alternation', schema: {type: 'string', pattern: '^(yes|no|maybe)$'}, bounded: true},
  {name: 'format date', schema: {type: 'string', format: 'date'}, bounded: true},
  {name: 'format date with the lengths it implies', schema: {type: 'string', format: 'date', minLength: 10, maxLength: 10}, bounded: true},
  {name: 'format uri with minLength 1 (Pydantic AnyUrl)', schema: {type: 'string', format: 'uri', minLength: 1}, bounded: false},
  {name: 'format time', schema: {type: 'string', format: 'time'}, bounded: true},
  {name: 'format date-time', schema: {type: 'string', format: 'date-time'}, bounded: true},
  {name: 'format ipv4', schema: {type: 'string', format: 'ipv4'}, bounded: true},
  {name: 'format uuid', schema: {type: 'string', format: 'uuid'}, bounded: true},
  {name: 'nullable enum', schema: {type: ['string', 'null'], enum: ['x', 'y', null]}, bounded: true},
  // objects
  {name: 'flat object', schema: obj({name: str(8, 1), age: int(0, 120), admin: {type: 'boolean'}}), bounded: true},
  {name: 'optional keys', schema: obj({id: int(1, 9), nick: str(5), score: int(0, 10)}, ['id']), bounded: true},
  {name: 'no required keys', schema: obj({a: {type: 'boolean'}, b: {type: 'null'}}, []), bounded: true},
  {name: 'nested objects', schema: obj({user: obj({name: str(6, 1), address: obj({city: str(8, 1), zip: {type: 'string', pattern: '^[0-9]{5}$'}})})}), bounded: true},
  {name: 'three levels', schema: obj({a: obj({b: obj({c: int(0, 3)})})}), bounded: true},
  {name: 'min and max properties', schema: obj({a: int(0, 1), b: int(0, 1), c: int(0, 1)}, [], {minProperties: 1, maxProperties: 2}), bounded: true},
  {name: 'pattern properties', schema: {type: 'object', patternProperties: {'^k[0-9]$': int(0, 9)}, additionalProperties: false, maxProperties: 3}, bounded: true},
  {name: 'empty object', schema: {type: 'object', properties: {}, additionalProperties: false}, bounded: true},
  {name: 'object with enum and const', schema: obj({kind: {const: 'circle'}, unit: {enum: ['cm', 'mm']}, r: int(1, 50)}), bounded: true},
  {name: 'described object', schema: {...obj({q: str(4, 1)}), title: 'Query', description: 'A tiny query', $schema: 'https://json-schema.org/draft/2020-12/schema'}, bounded: true},
  // arrays
  {name: 'array bounds', schema: {type: 'array', items: int(0, 9), minItems: 2, maxItems: 4}, bounded: true},
  {name: 'array exact count', schema: {type: 'array', items: {type: 'boolean'}, minItems: 3, maxItems: 3}, bounded: true},
  {name: 'array of objects', schema: {type: 'array', items: obj({id: int(0, 99), tag: {enum: ['a', 'b']}}), minItems: 1, maxItems: 2}, bounded: true},
  {name: 'array of strings', schema: {type: 'array', items: str(4, 1), maxItems: 3}, bounded: true},
  {name: 'nested arrays', schema: {type: 'array', items: {type: 'array', items: int(0, 1), maxItems: 2}, maxItems: 2}, bounded: true},
  {name: 'tuple', schema: {type: 'array', prefixItems: [int(0, 9), {enum: ['x', 'y']}, {type: 'boolean'}], items: false}, bounded: true},
  {name: 'empty array only', schema: {type: 'array', maxItems: 0}, bounded: true},
  {name: 'object with array field', schema: obj({tags: {type: 'array', items: {enum: ['new', 'old', 'hot']}, minItems: 1, maxItems: 3}, count: int(0, 3)}), bounded: true},
  // anyOf / oneOf
  {name: 'anyOf scalars', schema: {anyOf: [int(0, 9), {type: 'boolean'}, {type: 'null'}]}, bounded: true},
  {name: 'anyOf objects', schema: {anyOf: [obj({a: int(0, 1)}), obj({b: str(3, 1)})]}, bounded: true},
  {name: 'oneOf by type', schema: {oneOf: [{type: 'string', enum: ['s']}, int(0, 5)]}, bounded: true},
  {name: 'oneOf discriminated', schema: {oneOf: [obj({type: {const: 'cat'}, lives: int(1, 9)}), obj({type: {const: 'dog'}, good: {type: 'boolean'}})]}, bounded: true},
  {name: 'nullable field', schema: obj({note: {anyOf: [str(5), {type: 'null'}]}}), bounded: true},
  {name: 'type list', schema: obj({v: {type: ['integer', 'null'], minimum: 0, maximum: 3}}), bounded: false},
  // $ref / $defs
  {name: '$defs reference', schema: {$defs: {point: obj({x: int(-9, 9), y: int(-9, 9)})}, ...obj({from: {$ref: '#/$defs/point'}, to: {$ref: '#/$defs/point'}})}, bounded: true},
  {name: 'definitions reference', schema: {definitions: {color: {enum: ['r', 'g', 'b']}}, type: 'array', items: {$ref: '#/definitions/color'}, maxItems: 3}, bounded: true},
  {name: 'nested $ref chain', schema: {$defs: {a: {$ref: '#/$defs/b'}, b: obj({z: int(0, 1)})}, $ref: '#/$defs/a'}, bounded: true},
  {name: 'recursive list', schema: {$defs: {node: obj({v: int(0, 9), next: {anyOf: [{$ref: '#/$defs/node'}, {type: 'null'}]}})}, $ref: '#/$defs/node'}, bounded: false},
  {name: 'recursive tree', schema: {$defs: {t: obj({name: str(3, 1), kids: {type: 'array', items: {$ref: '#/$defs/t'}, maxItems: 2}})}, $ref: '#/$defs/t'}, bounded: false},
  // unbounded ones (free strings and numbers): the grammar still holds them to the schema
  {name: 'free string', schema: {type: 'string'}, bounded: false},
  {name: 'free number', schema: {type: 'number'}, bounded: false},
  {name: 'free integer', schema: {type: 'integer'}, bounded: false},
  {name: 'any object', schema: {type: 'object'}, bounded: false},
  {name: 'free array', schema: {type: 'array'}, bounded: false},
  {name: 'string with pattern plus', schema: {type: 'string', pattern: '^[a-z]+@[a-z]+\\.com$'}, bounded: false},
  {name: 'format email', schema: {type: 'string', format: 'email'}, bounded: false},
  {name: 'format uri', schema: {type: 'string', format: 'uri'}, bounded: false},
  {name: 'person', schema: obj({name: {type: 'string'}, email: {type: 'string', format: 'email'}, age: {type: 'integer', minimum: 0, maximum: 150}, tags: {type: 'array', items: {type: 'string'}}}, ['name', 'age']), bounded: false},
  {name: 'additional properties schema', schema: {type: 'object', additionalProperties: {type: 'integer', minimum: 0, maximum: 9}}, bounded: false},
]

/** Schemas whose keywords cannot be enforced, and the keyword the 400 must name. */
export const UNSUPPORTED: Array<{schema: Record<string, unknown>; keyword: string}> = [
  {schema: {type: 'array', items: {type: 'integer'}, uniqueItems: true}, keyword: 'uniqueItems'},
  {schema: {type: 'integer', multipleOf: 3}, keyword: 'multipleOf'},
  {schema: {type: ['number', 'integer'], minimum: 0, maximum: 1}, keyword: 'minimum'},
  {schema: {type: 'number', exclusiveMinimum: 1, exclusiveMaximum: 1}, keyword: 'exclusiveMinimum'},
  {schema: {not: {type: 'string'}}, keyword: 'not'},
  {schema: {allOf: [{type: 'object'}, {required: ['a']}]}, keyword: 'allOf'},
  {schema: {if: {type: 'string'}, then: {minLength: 2}}, keyword: 'if'},
  {schema: {type: 'array', contains: {type: 'integer'}}, keyword: 'contains'},
  {schema: {type: 'object', properties: {a: {type: 'string'}}, dependentRequired: {a: ['b']}}, keyword: 'dependentRequired'},
  {schema: {type: 'object', propertyNames: {pattern: '^a'}}, keyword: 'propertyNames'},
  {schema: {type: 'object', unevaluatedProperties: false}, keyword: 'unevaluatedProperties'},
  {schema: {type: 'string', format: 'hostname'}, keyword: 'format'},
  {schema: {type: 'string', pattern: '(?=a)b'}, keyword: 'pattern'},
  {schema: {oneOf: [{type: 'integer'}, {type: 'number'}]}, keyword: 'oneOf'},
  {schema: {$ref: 'https://example.com/schema.json'}, keyword: '$ref'},
  {schema: {type: 'object', properties: {a: {$ref: '#/$defs/missing'}}}, keyword: '$ref'},
  {schema: {type: 'string', minLength: 2, pattern: '^a+$'}, keyword: 'minLength'},
  {schema: {type: 'string', maxLength: 3, enum: ['ab', 'abcd']}, keyword: 'maxLength'},
  {schema: {type: 'integer', minimum: 5, maximum: 1}, keyword: 'minimum'},
]
