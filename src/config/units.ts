// Parsing of human-friendly sizes and counts used by flags: "28G", "100K", "4194304".
// Suffixes are binary (K = 1024), matching how context windows (256K = 262,144) are quoted.

const MULTIPLIERS: Record<string, number> = {'': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4}

/** Parses "28G", "512M", "100K", "1.5G" or a plain integer. Returns undefined when the text is not such a value. */
export function parseScaled(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$/i.exec(text)
  if (!m) return undefined
  const value = Number(m[1]) * MULTIPLIERS[m[2].toUpperCase()]
  if (!Number.isFinite(value)) return undefined
  return Math.floor(value)
}

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let v = bytes
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return `${i === 0 ? v : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${units[i]}`
}
