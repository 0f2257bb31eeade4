import t from 'tap'
import {parseScaled, formatBytes} from '../../src/config/units.js'

t.test('sizes and counts accept K/M/G suffixes (binary)', async t => {
  t.equal(parseScaled('28G'), 28 * 1024 ** 3)
  t.equal(parseScaled('512M'), 512 * 1024 ** 2)
  t.equal(parseScaled('100K'), 102400)
  t.equal(parseScaled('256k'), 262144)
  t.equal(parseScaled('1.5G'), 1.5 * 1024 ** 3)
  t.equal(parseScaled('4194304'), 4194304)
  t.equal(parseScaled('8GiB'), 8 * 1024 ** 3)
})

t.test('anything else is not a size', async t => {
  for (const bad of ['', 'abc', '-5', '5X', '1e9', '12 34', 'G']) t.equal(parseScaled(bad), undefined, bad)
})

t.test('formatBytes', async t => {
  t.equal(formatBytes(512), '512 B')
  t.equal(formatBytes(28 * 1024 ** 3), '28.0 GiB')
})
