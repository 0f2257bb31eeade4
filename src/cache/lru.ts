// The one least-recently-used map of the project (compiled grammars by their source text, stored responses by id).
export class Lru<K, V> {
  private readonly map = new Map<K, V>()

  constructor(
    private readonly capacity: number,
    private readonly onEvict?: (value: V) => void,
  ) {}

  get(key: K): V | undefined {
    const v = this.map.get(key)
    if (v !== undefined) {
      this.map.delete(key)
      this.map.set(key, v)
    }
    return v
  }

  set(key: K, value: V): void {
    this.map.delete(key)
    this.map.set(key, value)
    while (this.map.size > this.capacity) {
      const [oldest, v] = this.map.entries().next().value as [K, V]
      this.map.delete(oldest)
      this.onEvict?.(v)
    }
  }

  /** Forgets one entry without the eviction callback; false when it was not held. */
  delete(key: K): boolean {
    return this.map.delete(key)
  }

  /** The values, least recently used first. */
  values(): IterableIterator<V> {
    return this.map.values()
  }

  /** Forgets every entry without the eviction callback (their owner is gone). */
  clear(): void {
    this.map.clear()
  }

  get size(): number {
    return this.map.size
  }
}
