// samplingParams: the request's fields first, then the package's defaults, then the APIs' own (temperature 1).
import t from 'tap'
import {samplingDefaultsOf, samplingParams} from '../../src/engine/sampling.js'
import {openAiSampling} from '../../plugins/shared/openai-sampling.js'
import {SplashError} from '../../src/errors.js'

t.test('unset fields take the package defaults; set fields win', async t => {
  const defaults = samplingDefaultsOf({temperature: 0.6, top_p: 0.95, top_k: 20, min_p: 0.05, repetition_penalty: 1.1})
  t.same(defaults, {temperature: 0.6, topP: 0.95, topK: 20, minP: 0.05, repetitionPenalty: 1.1})
  const s = samplingParams({}, defaults)
  t.match(s, {temperature: 0.6, topP: 0.95, topK: 20, minP: 0.05, repetitionPenalty: 1.1, presencePenalty: 0})
  t.match(samplingParams({temperature: 0, topK: 5}, defaults), {temperature: 0, topK: 5, topP: 0.95})
  t.equal(samplingParams({}).temperature, 1, 'no package default: temperature 1')
  t.same(samplingDefaultsOf(undefined), {})
})

t.test('OpenAI fields: null and absent are unset; top_k -1 is off, not the default', async t => {
  const defaults = {temperature: 0, topK: 20}
  t.match(openAiSampling({temperature: null, top_k: null}, defaults), {temperature: 0, topK: 20})
  t.match(openAiSampling({top_k: -1}, defaults), {temperature: 0, topK: 0})
  t.match(openAiSampling({temperature: 0.8}, defaults), {temperature: 0.8, topK: 20})
})

t.test('a request value out of range is refused whatever the defaults', async t => {
  t.throws(() => samplingParams({temperature: 3}, {temperature: 0}), SplashError)
  t.throws(() => openAiSampling({top_p: 0}, {topP: 0.9}), SplashError)
})
