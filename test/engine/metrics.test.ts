import t from 'tap'
import {Counter, Histogram, Metrics} from '../../src/engine/metrics.js'

t.test('counters with labels and escaping', async t => {
  const c = new Counter('x_total', 'help')
  t.same(c.lines(), ['x_total 0'])
  c.inc(2, {route: '/v1/a"b'})
  c.inc(1, {route: '/v1/a"b'})
  t.same(c.lines(), ['x_total{route="/v1/a\\"b"} 3'])
})

t.test('histogram buckets are cumulative', async t => {
  const h = new Histogram('h', 'help', [0.1, 1])
  h.observe(0.05)
  h.observe(0.5)
  h.observe(5)
  t.same(h.lines(), ['h_bucket{le="0.1"} 1', 'h_bucket{le="1"} 2', 'h_bucket{le="+Inf"} 3', 'h_sum 5.55', 'h_count 3'])
})

t.test('render has HELP and TYPE for every metric', async t => {
  const m = new Metrics()
  m.gauge('g', 'a gauge', () => 7)
  const text = m.render()
  t.match(text, /# TYPE splash_requests_total counter/)
  t.match(text, /# TYPE splash_time_to_first_token_seconds histogram/)
  t.match(text, /# TYPE g gauge\ng 7\n/)
})
