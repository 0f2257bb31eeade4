// The responses kept for previous_response_id and item_reference: a bounded in-memory LRU. A stored entry
// holds the whole conversation up to and including its output, as input items, so that a continuation
// only prepends them. Responses made with store:false are never kept.
import {Lru} from '../../../src/cache/lru.js'
import type {Item} from './schema.js'

export interface StoredResponse {
  /** Input items of the conversation so far (previous responses' first), then this response's output. */
  items: Item[]
  response: Record<string, unknown>
}

export class ResponseStore {
  private readonly entries: Lru<string, StoredResponse>

  constructor(readonly capacity = 256) {
    this.entries = new Lru(capacity)
  }

  get(id: string): StoredResponse | undefined {
    return this.entries.get(id)
  }

  set(id: string, entry: StoredResponse): void {
    this.entries.set(id, entry)
  }

  /** Forgets a response; false when it was not stored. */
  delete(id: string): boolean {
    return this.entries.delete(id)
  }

  /** An item of any stored response by its id (for item_reference), newest first. */
  findItem(id: string): Item | undefined {
    for (const entry of [...this.entries.values()].reverse()) {
      const hit = entry.items.find(item => item.id === id)
      if (hit) return hit
    }
    return undefined
  }

  get size(): number {
    return this.entries.size
  }
}
