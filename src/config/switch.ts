// An environment switch (SPLASH_DRAFT, SPLASH_PREFIX_CACHE, SPLASH_INLINE_STEPS …): 'off' for off / 0 / false / no,
// 'on' for on / 1 / true / yes (any case, spaces around ignored), undefined when unset or anything else.
export function envSwitch(value: string | undefined): 'on' | 'off' | undefined {
  const v = (value ?? '').trim().toLowerCase()
  if (v === 'off' || v === '0' || v === 'false' || v === 'no') return 'off'
  if (v === 'on' || v === '1' || v === 'true' || v === 'yes') return 'on'
  return undefined
}
