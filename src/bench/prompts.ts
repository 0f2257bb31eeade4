// The bench's prompts: short coding requests and a long coding conversation built from a fixed source file, so every
// engine sees the same text. A nonce at the start of the long prompt keeps runs from hitting each other's cache.

export const SHORT_PROMPTS = [
  'Write a TypeScript function that parses a semantic version string like "1.2.3-beta.1" into its parts, with tests.',
  'Implement an LRU cache in Python with get and put in O(1). Explain the design briefly.',
  'Write a Rust function that merges overlapping intervals in a Vec<(i64, i64)> and returns them sorted.',
  'Refactor this JavaScript loop into a reduce call: let s = 0; for (const x of xs) if (x > 0) s += x * 2;',
  'Write a Go HTTP handler that streams the lines of a file as server-sent events.',
  'Write a SQL query returning the top 3 customers by total order value per country, with window functions.',
  'Implement binary search over a sorted array of numbers in C, returning the insertion point when absent.',
  'Write a bash script that finds the 10 largest files under a directory and prints their sizes in MiB.',
]

const SOURCE = `// inventory.ts: a small inventory service
export interface Item { id: string; name: string; price: number; quantity: number; tags: string[] }

export class Inventory {
  private readonly items = new Map<string, Item>()

  add(item: Item): void {
    if (this.items.has(item.id)) throw new Error(\`duplicate item \${item.id}\`)
    if (item.price < 0 || item.quantity < 0) throw new Error('negative price or quantity')
    this.items.set(item.id, {...item, tags: [...item.tags]})
  }

  remove(id: string): boolean {
    return this.items.delete(id)
  }

  restock(id: string, amount: number): Item {
    const item = this.items.get(id)
    if (!item) throw new Error(\`unknown item \${id}\`)
    item.quantity += amount
    return item
  }

  totalValue(): number {
    let total = 0
    for (const item of this.items.values()) total += item.price * item.quantity
    return Math.round(total * 100) / 100
  }

  byTag(tag: string): Item[] {
    return [...this.items.values()].filter(i => i.tags.includes(tag)).sort((a, b) => a.name.localeCompare(b.name))
  }
}
`

/** About `chars` characters of code: the source repeated with numbered module names so no two blocks are equal. */
export function longCode(chars: number): string {
  const parts: string[] = []
  let n = 0
  for (let i = 0; n < chars; i++) {
    const block = `\n// ---- module ${i} ----\n${SOURCE.replace(/Inventory/g, `Inventory${i}`).replace(/inventory\.ts/g, `inventory${i}.ts`)}`
    parts.push(block)
    n += block.length
  }
  return parts.join('').slice(0, chars)
}

export function longPrompt(nonce: string, code: string): string {
  return `Session ${nonce}. Review the following TypeScript modules and list every bug and risky pattern you find.\n\n\`\`\`ts${code}\n\`\`\``
}

export const ASSISTANT_REPLY = 'The main risks are: restock accepts negative amounts, totalValue rounds only at the end, and byTag copies every item on each call.'
export const FOLLOW_UP = 'Now write unit tests for restock covering the unknown-id and negative-amount cases.'
