// Pearson's chi-square of observed token counts against a distribution, for tests that check a sampler's
// output frequencies: tokens expected fewer than 5 times are pooled into one rest category.

export function chiSquare(counts: Map<number, number>, p: Map<number, number>, n: number): {chi: number; df: number} {
  let chi = 0
  let df = -1
  let restP = 1
  let restC = n
  for (const [token, prob] of p) {
    const e = prob * n
    if (e < 5) continue
    const c = counts.get(token) ?? 0
    chi += (c - e) ** 2 / e
    df++
    restP -= prob
    restC -= c
  }
  if (restP * n >= 5) {
    chi += (restC - restP * n) ** 2 / (restP * n)
    df++
  }
  return {chi, df}
}

/** The chi-square quantile at p = 0.999 for df = 0..16 (index = df). */
export const CHI_999 = [0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59, 31.26, 32.91, 34.53, 36.12, 37.7, 39.25]

/**
 * The chi-square quantile at p = 0.999 for df degrees of freedom: the table up to 16, the Wilson–Hilferty
 * approximation above (within 0.4 % of the exact quantile from df 16 on).
 */
export function chiSquare999(df: number): number {
  if (df < CHI_999.length) return CHI_999[df]!
  const a = 2 / (9 * df)
  return df * (1 - a + 3.0902 * Math.sqrt(a)) ** 3
}
