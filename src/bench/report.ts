// The bench's outputs: a markdown table (one column per engine, plus the ratio), and a hand-written SVG chart.
import {fmtStats, fmt} from './common.js'
import type {ScenarioResults} from './scenarios.js'

interface Row {
  label: string
  value: (r: ScenarioResults) => string
  /** The number the ratio compares; `higher` says which way is better. */
  num: (r: ScenarioResults) => number
  higher: boolean
}

function rows(results: ScenarioResults[]): Row[] {
  const first = results[0]
  const out: Row[] = [
    {label: 'Decode, short coding prompt (tok/s)', value: r => fmtStats(r.decode.tokensPerSecond, 2), num: r => r.decode.tokensPerSecond.median, higher: true},
    {label: `Prefill, ${first.prefill.promptTokens}-token prompt (tok/s)`, value: r => fmtStats(r.prefill.tokensPerSecond), num: r => r.prefill.tokensPerSecond.median, higher: true},
    {label: `TTFT uncached, ${first.cachedTtft.replayTokens}-token replay (ms)`, value: r => fmtStats(r.cachedTtft.uncachedMs, 0), num: r => r.cachedTtft.uncachedMs.median, higher: false},
    {label: `TTFT cached, same replay (ms)`, value: r => `${fmtStats(r.cachedTtft.cachedMs, 0)}; ${fmt(r.cachedTtft.cachedTokens.median, 0)} tokens cached`, num: r => r.cachedTtft.cachedMs.median, higher: false},
    {label: 'Cached TTFT speed-up (uncached / cached)', value: r => `${fmt(r.cachedTtft.speedup, 2)}×`, num: r => r.cachedTtft.speedup, higher: true},
  ]
  for (const c of first.concurrency) {
    out.push({
      label: `Aggregate decode, ${c.clients} concurrent (tok/s)`,
      value: r => fmtStats(r.concurrency.find(x => x.clients === c.clients)?.aggregateTps ?? {median: NaN, min: NaN, max: NaN, n: 0}, 2),
      num: r => r.concurrency.find(x => x.clients === c.clients)?.aggregateTps.median ?? NaN,
      higher: true,
    })
  }
  return out
}

/** Markdown: medians with (min–max) over the runs; with two engines a ratio column (>1: the first is better). */
export function markdownTable(results: ScenarioResults[]): string {
  const head = ['Scenario', ...results.map(r => r.engine)]
  if (results.length === 2) head.push(`${results[0].engine} / ${results[1].engine}`)
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`]
  for (const row of rows(results)) {
    const cells = [row.label, ...results.map(r => row.value(r))]
    if (results.length === 2) {
      const a = row.num(results[0])
      const b = row.num(results[1])
      const ratio = row.higher ? a / b : b / a
      cells.push(Number.isFinite(ratio) ? `${ratio.toFixed(2)}×` : '–')
    }
    lines.push(`| ${cells.join(' | ')} |`)
  }
  return lines.join('\n')
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
const COLORS = ['#2563eb', '#f97316', '#16a34a', '#9333ea']

function niceMax(x: number): number {
  if (!(x > 0)) return 1
  const p = 10 ** Math.floor(Math.log10(x))
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p
  return 10 * p
}

interface Group {
  label: string
  values: number[]
}

function barPanel(x0: number, y0: number, w: number, h: number, title: string, groups: Group[], engines: string[]): string {
  const max = niceMax(Math.max(...groups.flatMap(g => g.values.filter(Number.isFinite)), 0))
  const plotX = x0 + 56
  const plotW = w - 66
  const plotY = y0 + 30
  const plotH = h - 70
  const parts: string[] = [`<text x="${x0 + w / 2}" y="${y0 + 16}" text-anchor="middle" font-size="14" font-weight="600">${esc(title)}</text>`]
  for (let t = 0; t <= 4; t++) {
    const v = (max * t) / 4
    const y = plotY + plotH - (plotH * t) / 4
    parts.push(`<line x1="${plotX}" y1="${y}" x2="${plotX + plotW}" y2="${y}" stroke="#e5e7eb"/>`)
    parts.push(`<text x="${plotX - 6}" y="${y + 4}" text-anchor="end" font-size="11" fill="#555">${esc(fmt(v, v < 10 ? 1 : 0))}</text>`)
  }
  const gw = plotW / Math.max(1, groups.length)
  const bw = Math.min(40, (gw * 0.7) / Math.max(1, engines.length))
  groups.forEach((g, i) => {
    const gx = plotX + gw * i + (gw - bw * engines.length) / 2
    g.values.forEach((v, k) => {
      const vh = Number.isFinite(v) ? (plotH * v) / max : 0
      const x = gx + bw * k
      parts.push(`<rect x="${x.toFixed(1)}" y="${(plotY + plotH - vh).toFixed(1)}" width="${(bw - 2).toFixed(1)}" height="${vh.toFixed(1)}" fill="${COLORS[k % COLORS.length]}"><title>${esc(`${engines[k]}: ${fmt(v, 2)} tok/s`)}</title></rect>`)
      parts.push(`<text x="${(x + bw / 2 - 1).toFixed(1)}" y="${(plotY + plotH - vh - 3).toFixed(1)}" text-anchor="middle" font-size="10">${esc(fmt(v, v < 10 ? 2 : 0))}</text>`)
    })
    parts.push(`<text x="${(plotX + gw * i + gw / 2).toFixed(1)}" y="${plotY + plotH + 16}" text-anchor="middle" font-size="11">${esc(g.label)}</text>`)
  })
  parts.push(`<line x1="${plotX}" y1="${plotY + plotH}" x2="${plotX + plotW}" y2="${plotY + plotH}" stroke="#333"/>`)
  parts.push(`<text x="${x0 + 12}" y="${plotY + plotH / 2}" transform="rotate(-90 ${x0 + 12} ${plotY + plotH / 2})" text-anchor="middle" font-size="11">tokens/s</text>`)
  return parts.join('\n')
}

/** Two panels: tokens/s by scenario (decode, prefill), and aggregate decode by concurrency. */
export function svgChart(results: ScenarioResults[], subtitle: string): string {
  const W = 900
  const H = 380
  const engines = results.map(r => r.engine)
  const scen: Group[] = [
    {label: 'decode', values: results.map(r => r.decode.tokensPerSecond.median)},
    {label: `prefill (${results[0].prefill.promptTokens} tok)`, values: results.map(r => r.prefill.tokensPerSecond.median)},
  ]
  const conc: Group[] = results[0].concurrency.map(c => ({
    label: `${c.clients} concurrent`,
    values: results.map(r => r.concurrency.find(x => x.clients === c.clients)?.aggregateTps.median ?? NaN),
  }))
  const legend = engines
    .map((e, k) => `<rect x="${20 + k * 140}" y="${H - 22}" width="12" height="12" fill="${COLORS[k % COLORS.length]}"/><text x="${36 + k * 140}" y="${H - 12}" font-size="12">${esc(e)}</text>`)
    .join('\n')
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, sans-serif">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="16" font-weight="700">Splash bench</text>`,
    `<text x="${W / 2}" y="38" text-anchor="middle" font-size="11" fill="#555">${esc(subtitle)}</text>`,
    barPanel(10, 48, W / 2 - 20, H - 80, 'Tokens/s by scenario', scen, engines),
    barPanel(W / 2 + 10, 48, W / 2 - 20, H - 80, 'Aggregate decode by concurrency', conc, engines),
    legend,
    '</svg>',
    '',
  ].join('\n')
}
