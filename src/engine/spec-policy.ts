// The speculative block policy: how many drafts a sequence's next verify pass carries, and whether drafting pays
// at all. A sequence's drafts are accepted one after another with probability α (its decayed estimate), so a pass
// of k drafts commits E(k) = (1 − α^(k+1)) / (1 − α) tokens on average; it costs c(k) = r0 + r1·(k + 1) plain
// decode steps (draft pass + verify of k + 1 rows). The pass length maximises E(k) / c(k); drafting pays when
// that exceeds 1, the tokens per unit of a plain decode.

/** A pass's cost in plain decode steps: r0 + r1 · (rows verified). */
export interface PassCost {
  r0: number
  r1: number
}

/**
 * The cost model sampled sequences use on the CPU backend: fixed, so that their schedule (and with it their output
 * for a seed) never depends on timings. Measured on the default package on a 2-core x86-64 CPU (draft + verify of
 * k + 1 rows, CPU time): r0 ≈ 1.7 decodes, r1 ≈ 0.5 decode per verified row.
 */
export const FIXED_COST: PassCost = {r0: 1.7, r1: 0.5}

/**
 * The same on a GPU, where a verified row costs far less than a decode: a server's step trace of the full-depth
 * qwen3.6-35b-a3b shape on the H200 (SPLASH_TRACE_STEPS; plain decodes ~2.65 ms, passes of 6 / 8 / 13 / 16 rows
 * 3.0 / 3.3 / 5.1–5.3 / 5.4–5.7 decodes, draft pass included): r0 ≈ 1.5, r1 ≈ 0.25 (the dense shape's rows are cheaper
 * still). It is also the measured model's prior there, so a server's first sequences draft from their first decode
 * instead of waiting for the probe of a CPU-priced policy.
 */
export const FIXED_COST_GPU: PassCost = {r0: 1.5, r1: 0.25}

/** The fixed pass cost for a backend. */
export function fixedCost(backend: string | undefined): PassCost {
  return backend === undefined || backend === 'cpu' ? FIXED_COST : FIXED_COST_GPU
}

/** The pass cost measured by the engine (greedy sequences, whose output does not depend on the schedule). */
export class MeasuredCost implements PassCost {
  /** `prior`: the fixed model whose shape stands in until passes have been measured (fixedCost of the backend). */
  constructor(private readonly prior: PassCost = FIXED_COST) {}

  /** Seconds of a plain decode step per sequence (decayed mean). */
  private plain = 0
  // decayed sums for the fit of (pass cost in plain steps) = r0 + r1 · (rows per pass)
  private w = 0
  private x = 0
  private y = 0
  private xx = 0
  private xy = 0

  observePlain(secondsPerSequence: number): void {
    this.plain = this.plain === 0 ? secondsPerSequence : 0.9 * this.plain + 0.1 * secondsPerSequence
  }

  observePass(secondsPerPass: number, rowsPerPass: number): void {
    if (this.plain === 0) return
    const y = secondsPerPass / this.plain
    const d = 0.95
    this.w = d * this.w + 1
    this.x = d * this.x + rowsPerPass
    this.y = d * this.y + y
    this.xx = d * this.xx + rowsPerPass * rowsPerPass
    this.xy = d * this.xy + rowsPerPass * y
  }

  /**
   * Per verified row: the fitted slope once the rows per pass have varied enough. Before that, the prior's shape
   * scaled to the cost measured at the rows seen: a slope taken alone from another machine (a CPU's, where a row
   * costs half a decode, on a GPU where rows are nearly free) would price rows so high that a sequence whose passes
   * all had one length would drop to 1-draft passes and stay there (its rows per pass then never vary either).
   */
  get r1(): number {
    if (this.w < 1) return this.prior.r1
    const mx = this.x / this.w
    const v = this.w >= 4 ? this.xx / this.w - mx * mx : 0
    if (v < 1) return this.prior.r1 * this.scale(mx)
    return Math.min(2, Math.max(0.05, (this.xy / this.w - mx * (this.y / this.w)) / v))
  }

  get r0(): number {
    if (this.w < 1) return this.prior.r0
    return Math.max(0, this.y / this.w - this.r1 * (this.x / this.w))
  }

  /** Measured over fixed-model cost of a pass of `rows` rows (the mean pass seen). */
  private scale(rows: number): number {
    return this.y / this.w / (this.prior.r0 + this.prior.r1 * rows)
  }
}

/** A sequence's acceptance: decayed counts of accepted drafts over drafts verified (a rejection ends a pass). */
export class Acceptance {
  // an optimistic start (α = 0.75), so that a new sequence tries its draft
  private accepted = 1.5
  private trials = 2

  /** `decay`: the weight a pass's counts keep per pass after it. */
  constructor(private readonly decay = 0.85) {}

  observe(accepted: number, drafted: number): void {
    const d = this.decay
    this.accepted = d * this.accepted + accepted
    this.trials = d * this.trials + accepted + (accepted < drafted ? 1 : 0)
  }

  /** Starts again from α, with the weight of the optimistic start (two trials). */
  restart(alpha: number): void {
    this.accepted = 2 * alpha
    this.trials = 2
  }

  get alpha(): number {
    return Math.min(0.99, this.accepted / this.trials)
  }
}

/**
 * What the greedy and constrained sequences of one model have seen of its draft (the scheduler keeps one). Their
 * output does not depend on the schedule, so they may learn from each other: a new one starts from the acceptance
 * their passes had (decayed per pass) instead of the optimistic start, and while drafting does not pay they probe
 * on one clock for the whole model, once per `probeEvery` plain decodes of all of them together (16, doubling up to
 * 256 while probes keep finding that it does not pay; back to 16 once it does). Before, every request started
 * optimistic and probed on its own after 16 decodes, so a draft that predicts nothing cost one pass per request
 * (the default package with random draft weights: 21 passes over 16 short answers). Sampled sequences keep their own
 * estimate and clock, since their schedule decides their output for a seed and must not depend on other requests.
 */
export class DraftHistory {
  private readonly acceptance = new Acceptance(0.95)
  private passes = 0
  private since = 0
  /** Plain decodes between probes. */
  probeEvery = 16

  /** A verify pass of a greedy or constrained sequence: `accepted` of `drafted` drafts. */
  observe(accepted: number, drafted: number): void {
    this.acceptance.observe(accepted, drafted)
    this.passes++
  }

  /** The acceptance the passes seen so far had (the optimistic start before any). */
  get alpha(): number {
    return this.acceptance.alpha
  }

  /** A new sequence's estimate starts from what the model's passes have shown (unchanged before any pass). */
  start(a: Acceptance): void {
    if (this.passes > 0) a.restart(this.acceptance.alpha)
  }

  /** Drafting pays for a sequence: probes go back to every 16 plain decodes. */
  paid(): void {
    this.probeEvery = 16
  }

  /** A plain decode of a sequence whose drafting does not pay; true when it is the clock's turn to probe instead. */
  probe(): boolean {
    if (++this.since < this.probeEvery) return false
    this.since = 0
    this.probeEvery = Math.min(256, 2 * this.probeEvery)
    return true
  }
}

/** Expected tokens committed by a pass of k drafts at per-draft acceptance α (the last row's token included). */
export function expectedCommit(alpha: number, k: number): number {
  return (1 - alpha ** (k + 1)) / (1 - alpha)
}

/** The best number of drafts (1..maxK) and its gain: tokens per plain-decode unit (> 1: drafting pays). */
export function bestBlock(alpha: number, cost: PassCost, maxK: number): {k: number; gain: number} {
  let best = {k: 1, gain: 0}
  for (let k = 1; k <= maxK; k++) {
    const gain = expectedCommit(alpha, k) / (cost.r0 + cost.r1 * (k + 1))
    if (gain > best.gain) best = {k, gain}
  }
  return best
}
