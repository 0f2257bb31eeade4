// The one parser of the TypeScript side's environment knobs (src/config/options.ts, docs/configuration.md).
import t from 'tap'
import {readOptions} from '../../src/config/options.js'

t.test('unset: every knob at its default', async t => {
  const o = readOptions({})
  t.same(
    [o.draftOff, o.prefixCacheOff, o.prefixDisk, o.fixedDraft, o.maxRunning, o.maxWaiting, o.maxOutputTokens, o.tokenBudget, o.inlineSteps, o.gather, o.traceSteps],
    [false, false, undefined, undefined, undefined, undefined, undefined, undefined, undefined, undefined, undefined],
  )
  t.equal(o.defaultPackage, undefined)
  t.equal(o.dataDir, undefined)
})

t.test('switches, numbers and names parse; values that do not are ignored', async t => {
  const o = readOptions({
    SPLASH_DRAFT: ' OFF ',
    SPLASH_PREFIX_CACHE: 'no',
    SPLASH_PREFIX_DISK: '1',
    SPLASH_INLINE_STEPS: 'false',
    SPLASH_GATHER: ' On ',
    SPLASH_MAX_RUNNING: ' 3 ',
    SPLASH_MAX_WAITING: '0',
    SPLASH_MAX_OUTPUT_TOKENS: '2.5',
    SPLASH_TOKEN_BUDGET: '8',
    SPLASH_TRACE_STEPS: '  ',
    SPLASH_DEFAULT_PACKAGE: '',
  })
  t.equal(o.draftOff, true)
  t.equal(o.prefixCacheOff, true)
  t.equal(o.prefixDisk, 'on')
  t.equal(o.inlineSteps, 'off')
  t.equal(o.gather, 'on')
  t.equal(o.maxRunning, 3)
  t.equal(o.maxWaiting, undefined, '0 is not a queue bound')
  t.equal(o.maxOutputTokens, undefined, 'not an integer')
  t.equal(o.tokenBudget, 16, 'at least 16 tokens a step')
  t.equal(o.traceSteps, undefined, 'blank: no trace')
  t.equal(o.defaultPackage, '', 'empty: serve starts without a model')
  t.equal(readOptions({SPLASH_DRAFT: 'maybe'}).draftOff, false)
})

t.test('a fixed draft block: SPLASH_DRAFT_FIXED with an optional SPLASH_DRAFT_K', async t => {
  t.equal(readOptions({SPLASH_DRAFT_FIXED: '1'}).fixedDraft, 0, 'the whole block')
  t.equal(readOptions({SPLASH_DRAFT_FIXED: '1', SPLASH_DRAFT_K: '4'}).fixedDraft, 4)
  t.equal(readOptions({SPLASH_DRAFT_K: '4'}).fixedDraft, undefined, 'K alone does nothing')
})
