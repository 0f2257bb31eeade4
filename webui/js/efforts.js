// The reasoning efforts to offer: the ones the served package declares (GET /v1/models may list them as
// `reasoning_efforts`, an array of names or an object keyed by name, with `reasoning_effort_default`),
// else the standard list.

export const STANDARD_EFFORTS = ['none', 'low', 'medium', 'high', 'xhigh']

export function effortsOf(model) {
  const declared = model?.reasoning_efforts
  let list = STANDARD_EFFORTS
  if (Array.isArray(declared) && declared.length) list = declared.map(String)
  else if (declared && typeof declared === 'object' && Object.keys(declared).length) list = Object.keys(declared)
  const def = model?.reasoning_effort_default ?? model?.default_reasoning_effort
  return {list, default: typeof def === 'string' && def ? def : null}
}
