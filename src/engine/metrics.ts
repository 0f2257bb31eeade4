// Prometheus metrics: counters, gauges and histograms, rendered in the text exposition format.
// The runtime records into one registry; the /metrics plugin only renders it.

type Labels = Record<string, string>

function labelKey(labels: Labels): string {
  const keys = Object.keys(labels).sort()
  return keys.map(k => `${k}="${labels[k].replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`).join(',')
}

abstract class Metric {
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge' | 'histogram',
  ) {}
  abstract lines(): string[]
}

export class Counter extends Metric {
  private readonly values = new Map<string, number>()
  constructor(name: string, help: string) {
    super(name, help, 'counter')
  }
  inc(by = 1, labels: Labels = {}): void {
    const k = labelKey(labels)
    this.values.set(k, (this.values.get(k) ?? 0) + by)
  }
  get(labels: Labels = {}): number {
    return this.values.get(labelKey(labels)) ?? 0
  }
  lines(): string[] {
    if (this.values.size === 0) return [`${this.name} 0`]
    return [...this.values].map(([k, v]) => `${this.name}${k ? `{${k}}` : ''} ${v}`)
  }
}

export class Gauge extends Metric {
  constructor(
    name: string,
    help: string,
    private readonly read: () => number,
  ) {
    super(name, help, 'gauge')
  }
  lines(): string[] {
    return [`${this.name} ${this.read()}`]
  }
}

/** A constant 1 whose labels carry facts (the Prometheus "info" pattern: what runs, on what). */
export class Info extends Metric {
  constructor(
    name: string,
    help: string,
    private readonly labels: Labels,
  ) {
    super(name, help, 'gauge')
  }
  lines(): string[] {
    return [`${this.name}{${labelKey(this.labels)}} 1`]
  }
}

export class Histogram extends Metric {
  private readonly counts: number[]
  private sum = 0
  private count = 0
  constructor(
    name: string,
    help: string,
    private readonly buckets: number[],
  ) {
    super(name, help, 'histogram')
    this.counts = new Array(buckets.length).fill(0)
  }
  observe(v: number): void {
    this.sum += v
    this.count++
    for (let i = 0; i < this.buckets.length; i++) if (v <= this.buckets[i]) this.counts[i]++
  }
  get total(): number {
    return this.count
  }
  lines(): string[] {
    const out = this.buckets.map((b, i) => `${this.name}_bucket{le="${b}"} ${this.counts[i]}`)
    out.push(`${this.name}_bucket{le="+Inf"} ${this.count}`, `${this.name}_sum ${this.sum}`, `${this.name}_count ${this.count}`)
    return out
  }
}

const LATENCY = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

export class Metrics {
  private readonly all: Metric[] = []
  readonly requests = this.add(new Counter('splash_requests_total', 'HTTP requests answered, by route and status'))
  readonly serverErrors = this.add(new Counter('splash_server_errors_total', 'Server-side failures (5xx answers and errors ending a started stream), by route and code'))
  readonly promptTokens = this.add(new Counter('splash_prompt_tokens_total', 'Prompt tokens received'))
  readonly generatedTokens = this.add(new Counter('splash_generation_tokens_total', 'Tokens generated'))
  readonly cacheHits = this.add(new Counter('splash_prefix_cache_hits_total', 'Requests that reused a cached prefix'))
  readonly cachedTokens = this.add(new Counter('splash_prefix_cache_reused_tokens_total', 'Prompt tokens taken from the prefix cache'))
  readonly finished = this.add(new Counter('splash_generations_total', 'Generations ended, by reason'))
  readonly ttft = this.add(new Histogram('splash_time_to_first_token_seconds', 'Time from admission to the first generated token', LATENCY))
  readonly interToken = this.add(new Histogram('splash_inter_token_seconds', 'Time between generated tokens of one request', LATENCY))
  readonly specAcceptance = this.add(
    new Histogram('splash_spec_acceptance_length', 'Tokens committed per speculative verify pass (accepted drafts + 1)', [1, 2, 3, 4, 5, 6, 8, 10, 12, 16]),
  )
  readonly specPasses = this.add(new Counter('splash_spec_verify_passes_total', 'Target passes that verified drafted tokens'))
  readonly specDrafted = this.add(new Counter('splash_spec_draft_tokens_total', 'Tokens proposed by the draft'))
  readonly specCommitted = this.add(new Counter('splash_spec_committed_tokens_total', 'Tokens committed by verify passes'))

  observeAcceptance(committed: number, drafted: number): void {
    this.specAcceptance.observe(committed)
    this.specPasses.inc()
    this.specDrafted.inc(drafted)
    this.specCommitted.inc(committed)
  }

  add<M extends Metric>(m: M): M {
    this.all.push(m)
    return m
  }

  gauge(name: string, help: string, read: () => number): void {
    if (this.all.some(m => m.name === name)) return
    this.all.push(new Gauge(name, help, read))
  }

  /** Sets (or replaces) an info metric: a model loaded later replaces the earlier one's labels. */
  info(name: string, help: string, labels: Labels): void {
    const i = this.all.findIndex(m => m.name === name)
    const m = new Info(name, help, labels)
    if (i >= 0) this.all[i] = m
    else this.all.push(m)
  }

  render(): string {
    const out: string[] = []
    for (const m of this.all) out.push(`# HELP ${m.name} ${m.help}`, `# TYPE ${m.name} ${m.type}`, ...m.lines())
    return out.join('\n') + '\n'
  }
}
