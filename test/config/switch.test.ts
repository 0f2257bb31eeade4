// Environment switches: the spellings of on and off, and anything else left to the caller's default.
import t from 'tap'
import {envSwitch} from '../../src/config/switch.js'

t.test('off, on, and everything else', async t => {
  for (const v of ['off', '0', 'false', 'no', ' OFF ', 'No']) t.equal(envSwitch(v), 'off', JSON.stringify(v))
  for (const v of ['on', '1', 'true', 'yes', ' On', 'TRUE']) t.equal(envSwitch(v), 'on', JSON.stringify(v))
  for (const v of [undefined, '', ' ', '2', 'maybe', 'offf']) t.equal(envSwitch(v), undefined, JSON.stringify(v))
})
